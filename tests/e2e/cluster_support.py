"""Faults of a clustered stack (``stack_cluster`` 3): NATS nodes, the Redis primary, service replicas.

A node is killed by name (SIGKILL) and restarted on its ports with its store; who leads a
stream is asked of the nodes' monitoring (``/jsz``), who is connected where of ``/connz``.
A Redis failover kills whichever server the Sentinels name primary, waits until they name
the other and it answers as primary, then restarts the killed one (the Sentinels make it a
replica of the new primary).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
from collections import Counter
from typing import Any

import redis

from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.nats_permissions import SERVICES
from effectgate.devstack.cluster import NatsCluster
from effectgate.devstack.sentinels import SentinelGroup

BUCKETS = (
    catalog.TOOLS_BUCKET,
    catalog.POLICY_BUCKET,
    catalog.CARDS_BUCKET,
    catalog.MCP_CALLS_BUCKET,
    catalog.LEASES_BUCKET,
)
STREAMS = (catalog.STREAM, catalog.RESULTS_STREAM, *(f"KV_{bucket}" for bucket in BUCKETS))
"""Every stream of the bus: the record, the results and each bucket's."""


def cluster_of(stack: Stack) -> NatsCluster:
    assert stack.cluster is not None, "not a clustered stack"
    return stack.cluster


def sentinels_of(stack: Stack) -> SentinelGroup:
    assert stack.sentinels is not None, "not a clustered stack"
    return stack.sentinels


def leader(stack: Stack, stream: str) -> str:
    """The node leading ``stream`` now (asserted known)."""
    name = cluster_of(stack).stream_leader(stream)
    assert name, f"no leader known for {stream}"
    return name


def service_connections(stack: Stack) -> Counter[str]:
    """Node name to how many service connections it holds (``/connz?auth=true``).

    Secured, a service connects as its own user; open (no users), every client connection counts.
    """
    held: Counter[str] = Counter()
    for name, node in cluster_of(stack).nodes.items():
        if node.running():
            found = _get_json(f"{node.monitoring_url}/connz?auth=true&limit=1024")
            users = [c.get("authorized_user") for c in (found or {}).get("connections") or []]
            held[name] = sum(user in SERVICES for user in users) if stack.credentials else len(users)
    return held


async def kill_node(stack: Stack, name: str) -> None:
    """SIGKILL node ``name``."""
    cluster_of(stack).kill(name)


async def restart_node(stack: Stack, name: str, js: Any, timeout_s: float = 60.0) -> None:
    """Start node ``name`` again and wait until every stream has every replica current again."""
    await asyncio.to_thread(cluster_of(stack).restart, name)
    await asyncio.to_thread(cluster_of(stack).wait_ready)
    await caught_up(js, timeout_s)


async def caught_up(js: Any, timeout_s: float) -> None:
    """Wait until every stream of :data:`STREAMS` has a leader and all its replicas current.

    Raises:
        TimeoutError: not within ``timeout_s`` seconds (naming the stream).
    """
    deadline = time.monotonic() + timeout_s
    for stream in STREAMS:
        while not await _current(js, stream):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{stream} not caught up on every node after {timeout_s} s")
            await asyncio.sleep(0.2)


async def _current(js: Any, stream: str) -> bool:
    try:
        info = await js.stream_info(stream)
    except Exception:  # a leader being elected answers nothing for a moment
        return False
    cluster = info.cluster
    replicas = (cluster.replicas or []) if cluster else []
    return bool(cluster and cluster.leader) and all(r.current and not r.offline for r in replicas)


def primary_name(stack: Stack) -> str:
    """``redis-primary`` or ``redis-replica``: whichever the Sentinels name primary now."""
    port = sentinels_of(stack).master_port()
    return next(name for name in ("redis-primary", "redis-replica") if stack.servers[name].ports["redis"] == port)


async def fail_over_redis(stack: Stack, timeout_s: float = 30.0) -> str:
    """Kill the Redis primary, wait until the other server is primary, restart the killed one; its name.

    Raises:
        TimeoutError: no failover within ``timeout_s`` seconds.
    """
    killed = primary_name(stack)
    other = "redis-replica" if killed == "redis-primary" else "redis-primary"
    stack.servers[killed].kill()
    port, deadline = stack.servers[other].ports["redis"], time.monotonic() + timeout_s
    while not (sentinels_of(stack).master_port() == port and _role(port) == "master"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the Sentinels did not promote {other} within {timeout_s} s")
        await asyncio.sleep(0.1)
    await asyncio.to_thread(stack.servers[killed].restart)
    return killed


def _role(port: int) -> str | None:
    with contextlib.suppress(redis.RedisError):
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, socket_connect_timeout=1)
        with client:
            return str(client.info("replication").get("role"))
    return None


def _get_json(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None
