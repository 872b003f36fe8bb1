"""The runtime every effectgate service runs on: bus, service, handling, settings, telemetry, connections, stores.

What services and agents speak is in :mod:`effectgate.contracts`; local servers and the pytest
plugin are in :mod:`effectgate.devstack`.
"""
