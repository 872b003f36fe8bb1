"""Loads the shared pytest plugin that starts real NATS and Redis for connected tests."""

pytest_plugins = ["toolgate.shared.testing"]
