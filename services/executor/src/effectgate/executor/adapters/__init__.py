"""Adapters of the executor service: the I/O edges behind its ports."""
