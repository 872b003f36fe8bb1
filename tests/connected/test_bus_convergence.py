"""Provisioning converges a deployment to its replica count and limits, and says plainly what the server refuses."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, StorageType

from effectgate.contracts.bus import catalog
from effectgate.devstack.cluster import NatsCluster
from effectgate.devstack.servers import ServerProcess, nats_server
from effectgate.shared.config.bus import BusLayout
from effectgate.shared.stores.provision import (
    MULTI_FILTER_SINCE,
    LayoutRefused,
    ensure_bus,
    server_version,
    stream_config,
)

pytestmark = pytest.mark.connected

BUCKETS = catalog.BUCKETS
OWNED = (catalog.STREAM, catalog.RESULTS_STREAM, *(f"KV_{bucket}" for bucket in BUCKETS))


@pytest.fixture
def single(tmp_path: Path) -> Iterator[ServerProcess]:
    """A fresh nats-server of its own (the limits changed here must not reach other tests)."""
    with nats_server(tmp_path / "nats") as server:
        yield server


@pytest_asyncio.fixture
async def connection(single: ServerProcess) -> AsyncIterator[Client]:
    client = await nats.connect(single.url)
    yield client
    await client.close()


async def _replicas(js: JetStreamContext, stream: str) -> int:
    return (await js.stream_info(stream)).config.num_replicas or 1


async def _consumer_peers(js: JetStreamContext, durable: str, timeout_s: float = 10.0) -> int:
    """How many followers the consumer ``durable`` has once it has two (the server scales it after its stream)."""
    deadline = time.monotonic() + timeout_s
    while True:
        info = await js.consumer_info(catalog.STREAM, durable)
        assert info.config.num_replicas in (None, 0), "a consumer's own replica count would not follow its stream"
        peers = len(info.cluster.replicas or []) if info.cluster else 0
        if peers == 2 or time.monotonic() > deadline:
            return peers
        await asyncio.sleep(0.1)


async def test_a_single_node_deployment_converges_to_three_replicas_on_a_cluster(cluster: NatsCluster) -> None:
    nc = await nats.connect(servers=cluster.urls)
    js = nc.jetstream(timeout=10)
    await ensure_bus(js, BusLayout(replicas=1))
    assert [await _replicas(js, stream) for stream in OWNED] == [1] * len(OWNED)
    await ensure_bus(js, BusLayout(replicas=3))  # the buckets exist with R1: create_key_value says 10058
    assert [await _replicas(js, stream) for stream in OWNED] == [3] * len(OWNED)
    for spec in catalog.CONSUMERS:
        if spec.filter_subjects and server_version(js) < MULTI_FILTER_SINCE:
            continue  # not created on nats-server 2.9 (provision.py)
        assert await _consumer_peers(js, spec.durable) == 2  # inherits the stream's replicas
    await ensure_bus(js, BusLayout(replicas=3))  # provisioning started again on an R3 deployment
    assert [await _replicas(js, stream) for stream in OWNED] == [3] * len(OWNED)
    await nc.close()


@pytest.mark.nats_2_10
async def test_a_changed_record_limit_is_applied_in_place(connection: Client) -> None:
    js = connection.jetstream()
    await ensure_bus(js)
    await js.publish(catalog.Subjects.request("alice"), b"kept", stream=catalog.STREAM)
    await ensure_bus(js, BusLayout(record_max_age_s=3600.0, record_max_bytes=10_000_000))
    info = await js.stream_info(catalog.STREAM)
    assert (info.config.max_age, info.config.max_bytes) == (3600.0, 10_000_000)
    assert info.config.discard == DiscardPolicy.NEW
    assert info.state.messages == 1


async def test_the_record_discards_new_even_when_it_was_created_discarding_old(connection: Client) -> None:
    js = connection.jetstream()
    older = stream_config()
    older.discard = DiscardPolicy.OLD
    await js.add_stream(older)
    await ensure_bus(js)
    assert (await js.stream_info(catalog.STREAM)).config.discard == DiscardPolicy.NEW


async def test_a_change_the_server_refuses_is_said_in_one_line_and_provisioning_goes_on(
    connection: Client, caplog: pytest.LogCaptureFixture
) -> None:
    js = connection.jetstream()
    in_memory = stream_config()
    in_memory.storage = StorageType.MEMORY
    await js.add_stream(in_memory)
    with caplog.at_level(logging.ERROR, "effectgate.provision"):
        await ensure_bus(js)
    refusals = [
        r.getMessage() for r in caplog.records if r.name == "effectgate.provision" and r.levelno == logging.ERROR
    ]
    assert len(refusals) == 1
    assert f"stream {catalog.STREAM} keeps its configuration: the server refused storage: memory -> file" in refusals[0]
    assert (await js.stream_info(catalog.STREAM)).config.storage == StorageType.MEMORY
    assert await js.consumer_info(catalog.STREAM, catalog.POLICY_RECEIPTS.durable)
    assert await js.key_value(catalog.MCP_CALLS_BUCKET)


async def test_three_replicas_on_one_server_are_refused_plainly_and_it_runs_on_one(
    connection: Client, caplog: pytest.LogCaptureFixture
) -> None:
    js = connection.jetstream()
    await ensure_bus(js)
    with caplog.at_level(logging.ERROR, "effectgate.provision"):
        await ensure_bus(js, BusLayout(replicas=3))
    refusals = [
        r.getMessage() for r in caplog.records if r.name == "effectgate.provision" and r.levelno == logging.ERROR
    ]
    assert len(refusals) == len(OWNED)  # one line per stream and bucket, nothing raised
    assert all(" keeps its configuration: the server " in line for line in refusals), refusals
    assert all("num_replicas: 1 -> 3" in line for line in refusals), refusals
    assert [await _copies(js, stream) for stream in OWNED] == [1] * len(OWNED)


async def _copies(js: JetStreamContext, stream: str) -> int:
    """The copies the server keeps (nats-server 2.9 records ``num_replicas: 3`` on a single server, keeping one)."""
    cluster = (await js.stream_info(stream)).cluster
    return 1 + len(cluster.replicas or []) if cluster is not None else 1


async def test_a_byte_limit_is_refused_on_a_server_that_would_drop_the_oldest_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NATS_SERVER_BIN", "/usr/sbin/nats-server")  # the distribution's 2.9
    with nats_server(tmp_path / "nats") as server:
        nc = await nats.connect(server.url)
        assert nc.connected_server_version.minor == 9
        with pytest.raises(LayoutRefused, match="needs nats-server 2.10 or later"):
            await ensure_bus(nc.jetstream(), BusLayout(record_max_bytes=1_000_000))
        await ensure_bus(nc.jetstream())  # no byte limit: 2.9 serves
        await nc.close()
