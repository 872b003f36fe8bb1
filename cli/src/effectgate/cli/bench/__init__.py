"""``effectgate bench``: the governed call against a bare request/reply and the transport floor, in one run."""
