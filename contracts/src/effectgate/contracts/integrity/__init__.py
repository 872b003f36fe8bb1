"""Canonical JSON and hashes, Ed25519 signatures, sealed envelopes."""
