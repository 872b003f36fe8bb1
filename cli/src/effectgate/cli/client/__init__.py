"""The CLI on the bus: who it is, its connection, its requests to the running services."""
