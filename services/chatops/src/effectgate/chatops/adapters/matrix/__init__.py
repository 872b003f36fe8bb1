"""Matrix: the platform, card contents, what room events mean as answers."""
