"""A service started before the bus is provisioned waits for its consumers and buckets, then runs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client

from effectgate.contracts.bus import catalog
from effectgate.devstack.servers import nats_server
from effectgate.shared.consumer.consumers import Consumer, Delivery
from effectgate.shared.consumer.worker import DurableWorker, Settle, Settlement
from effectgate.shared.stores.policy_kv import PolicyBucket
from effectgate.shared.stores.provision import ensure_bus
from effectgate.shared.stores.tools_kv import ToolsBucket

pytestmark = pytest.mark.connected


@pytest_asyncio.fixture
async def bare(tmp_path: Path) -> AsyncIterator[Client]:
    """A connection to a nats-server of its own on which nothing is provisioned yet."""
    with nats_server(tmp_path / "nats") as server:
        client = await nats.connect(server.url)
        yield client
        await client.close()


async def _ack(delivery: Delivery) -> Settlement:
    return Settle.ACK


async def test_a_worker_and_buckets_bound_before_provisioning_wait_for_it(
    bare: Client, caplog: pytest.LogCaptureFixture
) -> None:
    worker = DurableWorker(bare, Consumer(catalog.CONSUMERS[0], _ack))
    with caplog.at_level(logging.WARNING, "effectgate.binding"):
        binding = asyncio.gather(
            worker.start(), ToolsBucket.open(bare.jetstream()), PolicyBucket.open(bare.jetstream())
        )
        await asyncio.sleep(1.0)
        assert not binding.done()  # still waiting, not dead
        await ensure_bus(bare.jetstream())
        await asyncio.wait_for(binding, 10.0)
    waits = [record.getMessage() for record in caplog.records if record.name == "effectgate.binding"]
    assert len(waits) == 3, waits  # one line each for the worker and the two buckets, not one per try
    assert any(f"consumer {catalog.CONSUMERS[0].durable}" in line for line in waits)
    await worker.stop()


async def test_a_worker_started_while_its_server_restarts_waits_for_it(tmp_path: Path) -> None:
    with nats_server(tmp_path / "nats") as server:
        client = await nats.connect(server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
        await ensure_bus(client.jetstream())
        server.kill()
        worker = DurableWorker(client, Consumer(catalog.CONSUMERS[0], _ack))
        starting = asyncio.ensure_future(worker.start())
        await asyncio.sleep(1.0)
        assert not starting.done()  # waiting for the server, not dead
        server.restart()
        await asyncio.wait_for(starting, 30.0)
        await worker.stop()
        await client.close()
