"""The registry service."""
