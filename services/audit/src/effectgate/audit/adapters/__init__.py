"""Adapters of the audit service: the I/O edges behind its ports."""
