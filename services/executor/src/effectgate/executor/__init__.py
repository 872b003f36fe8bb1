"""The executor service."""
