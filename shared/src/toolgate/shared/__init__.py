"""Library shared by every toolgate service: contracts, catalog, settings, telemetry, fixtures."""
