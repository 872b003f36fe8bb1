"""Shared pytest plugins (own state, no orphans, real NATS and Redis), and a Synapse per module for the Matrix tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from effectgate.devstack.synapse import Homeserver, SynapseMissing, synapse_env, synapse_server

pytest_plugins = ["effectgate.devstack.isolation", "effectgate.devstack.orphans", "effectgate.devstack.testing"]


@pytest.fixture(scope="module")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Homeserver]:
    """A Synapse on a free loopback port shared by the module's tests (stopped at its end).

    Fails (never skips) when the separate Synapse environment is not installed, saying how to install it.
    """
    try:
        synapse_env()
    except SynapseMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    with synapse_server(tmp_path_factory.mktemp("synapse")) as homeserver:
        yield homeserver
