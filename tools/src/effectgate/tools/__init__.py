"""Governed tools written in Python: declare them, publish their descriptors, serve them to the executor."""
