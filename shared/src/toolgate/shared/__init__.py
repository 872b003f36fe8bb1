"""The runtime every toolgate service runs on: bus, service, handling, settings, telemetry, connections, stores.

What services and agents speak is in :mod:`toolgate.contracts`; local servers and the pytest
plugin are in :mod:`toolgate.devstack`.
"""
