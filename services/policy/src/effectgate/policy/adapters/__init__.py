"""Adapters of the policy service: the I/O edges behind its ports."""
