"""Adapters of the approvals service: the I/O edges behind its ports."""
