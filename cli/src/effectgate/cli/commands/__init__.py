"""The command shells: each subcommand group of ``effectgate``."""
