"""A local 3-node NATS cluster: a replicated stream survives the loss of its leader; the cluster can be secured."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import nats
import nats.js.errors
import pytest
from nats.js.api import StreamConfig

from effectgate.cli.stack.credentials import BusCredentials
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.directory import Principal, PrincipalDirectory
from effectgate.devstack.cluster import NatsCluster, nats_cluster
from effectgate.shared.config.bus import BusLayout
from effectgate.shared.stores.provision import ensure_bus

pytestmark = [pytest.mark.connected, pytest.mark.fault]

T = TypeVar("T")


async def _leader_after(cluster: NatsCluster, stream: str, gone: str, timeout_s: float = 20.0) -> str:
    """The stream's leader once it is another node than ``gone``."""
    deadline = time.monotonic() + timeout_s
    while (leader := cluster.stream_leader(stream)) in (None, gone):
        assert time.monotonic() < deadline, f"no new leader of {stream} after {timeout_s}s"
        await asyncio.sleep(0.1)
    return leader


async def _once_served(call: Callable[[], Awaitable[T]], timeout_s: float = 30.0) -> T:
    """``await call()``, again while the cluster fails over (no responder yet, a timeout), for up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await call()
        except (nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError, nats.errors.TimeoutError):
            assert time.monotonic() < deadline, f"not served {timeout_s}s after the failover"
            await asyncio.sleep(0.2)


async def test_a_replicated_stream_reads_and_writes_after_its_leader_is_killed(cluster: NatsCluster) -> None:
    nc = await nats.connect(servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    js = nc.jetstream(timeout=10)
    await js.add_stream(StreamConfig(name="R3", subjects=["r3.>"], num_replicas=3))
    await js.publish("r3.before", b"one")
    leader = cluster.stream_leader("R3")
    assert leader is not None
    assert leader == (await js.stream_info("R3")).cluster.leader  # type: ignore[union-attr]
    cluster.kill(leader)
    assert await _leader_after(cluster, "R3", leader) != leader
    await _once_served(lambda: js.publish("r3.after", b"two"))
    assert (await _once_served(lambda: js.get_last_msg("R3", "r3.before"))).data == b"one"
    assert (await _once_served(lambda: js.stream_info("R3"))).state.messages == 2
    cluster.restart(leader)
    cluster.wait_ready()
    assert cluster.nodes[leader].running()
    await nc.close()


async def test_the_record_and_a_bucket_at_three_replicas_survive_the_loss_of_the_records_leader(
    cluster: NatsCluster,
) -> None:
    nc = await nats.connect(servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    js = nc.jetstream(timeout=10)
    await ensure_bus(js, BusLayout(replicas=3))
    tools = await js.key_value(catalog.TOOLS_BUCKET)
    await tools.put("kept", b"before")
    await js.publish(Subjects.request("alice"), b"before", stream=catalog.STREAM)
    leader = cluster.stream_leader(catalog.STREAM)
    assert leader is not None
    cluster.kill(leader)
    await _leader_after(cluster, catalog.STREAM, leader)
    await _once_served(lambda: js.publish(Subjects.request("alice"), b"after", stream=catalog.STREAM))
    assert (await _once_served(lambda: js.stream_info(catalog.STREAM))).state.messages == 2
    assert (await _once_served(lambda: tools.get("kept"))).value == b"before"
    await _once_served(lambda: tools.put("written", b"after"))
    await nc.close()


async def test_a_secured_cluster_admits_only_its_generated_users(tmp_path: Path) -> None:
    agent = Principal(name="alice", autonomy=1, roles=frozenset({"agent"}))
    credentials, text = BusCredentials.generate(PrincipalDirectory(principals={"alice": agent}, approvers={}))
    config = tmp_path / "nats.conf"
    config.write_text(text)
    with nats_cluster(tmp_path / "cluster", config=config) as cluster:
        registry = await nats.connect(servers=cluster.urls, **credentials.options("registry"))
        await ensure_bus(registry.jetstream(timeout=10), BusLayout(replicas=3))  # as the registry, its own rights
        info = await registry.jetstream().stream_info(catalog.STREAM)
        assert len(info.cluster.replicas or []) == 2  # type: ignore[union-attr]
        await registry.close()
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):
            await nats.connect(servers=cluster.urls, max_reconnect_attempts=0, allow_reconnect=False)
