"""Fixtures of the SDK's connected tests: a nats-server of the test's own, and a connection with the bus provisioned."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client

from effectgate.devstack.records_reading import records_answered
from effectgate.devstack.servers import ServerProcess, nats_server
from effectgate.shared.stores.provision import ensure_bus


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A nats-server (JetStream) on a free port, stopped after the test."""
    with nats_server(tmp_path / "nats") as process:
        yield process


@pytest_asyncio.fixture
async def nc(server: ServerProcess) -> AsyncIterator[Client]:
    """A connection to :func:`server`, with the streams and consumers provisioned; it answers records queries
    as the executor would (the SDK reads its stored receipts, decisions and results through them)."""
    connection = await nats.connect(server.url)
    await ensure_bus(connection.jetstream())
    async with records_answered(connection):
        yield connection
    await connection.close()
