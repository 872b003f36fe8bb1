"""The effectgate command line."""
