"""Configuration files and settings: effectgate.toml, service settings, NATS server config, key directories."""
