"""Adapters of the registry service: the I/O edges behind its ports."""
