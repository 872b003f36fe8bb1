"""The servers of a stack that survives losing one node (``effectgate up --cluster 3``).

A local NATS cluster (:func:`effectgate.devstack.cluster.nats_cluster`: one nats-server per
node, routes between them, each given the stack's users and permissions), its streams and
buckets at one replica per node (``EFFECTGATE_BUS_REPLICAS``), and Redis as a primary, a
replica and three Sentinels (:func:`effectgate.devstack.sentinels.sentinel_group`). Every
service that shares work runs :data:`REPLICAS` times; ``docs/how-to/run-the-stack.md`` says
what each loss costs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from effectgate.contracts.errors import Problem
from effectgate.devstack.cluster import NatsCluster, nats_cluster
from effectgate.devstack.sentinels import SentinelGroup, sentinel_group
from effectgate.devstack.servers import ServerProcess

__all__ = [
    "CLUSTER_SIZES",
    "REPLICAS",
    "ClusterServers",
    "ClusterSizeInvalid",
    "checked_size",
    "cluster_servers",
    "replica_names",
]

CLUSTER_SIZES = (1, 3, 5)
"""The node counts ``--cluster`` takes: 1 is one nats-server; 3 survives one lost node, 5 two."""

REPLICAS = 2
"""Processes of each service in a cluster stack: one can be lost while the other works on."""


class ClusterSizeInvalid(Problem, ValueError):
    """``--cluster`` was given a node count other than :data:`CLUSTER_SIZES`."""


def checked_size(size: int) -> int:
    """``size`` when it is one of :data:`CLUSTER_SIZES`.

    Raises:
        ClusterSizeInvalid: it is not (the message names the value and what is taken).
    """
    if size not in CLUSTER_SIZES:
        raise ClusterSizeInvalid(f"--cluster takes 1, 3 or 5 nodes (a majority must survive a loss), not {size}")
    return size


@dataclass(frozen=True)
class ClusterServers:
    """What :func:`cluster_servers` started: the NATS cluster and the Redis Sentinel group."""

    nats: NatsCluster
    redis: SentinelGroup

    @property
    def nats_url(self) -> str:
        """Every node's client URL, comma-separated (``NATS_URL`` of a service that fails over)."""
        return ",".join(self.nats.urls)

    def processes(self) -> dict[str, ServerProcess]:
        """Every server by name: ``nats-n1`` …, ``redis-primary``, ``redis-replica``, ``sentinel-1`` and so on."""
        nodes = {f"nats-{name}": node.server for name, node in self.nats.nodes.items() if node.server}
        redis = {"redis-primary": self.redis.primary, "redis-replica": self.redis.replica}
        return nodes | redis | {f"sentinel-{i}": s for i, s in enumerate(self.redis.sentinels, 1)}


@contextlib.contextmanager
def cluster_servers(state_dir: Path, size: int, nats_config: Path | None) -> Iterator[ClusterServers]:
    """Start a ``size``-node NATS cluster (each node given ``nats_config``) and a Sentinel group; stop both after.

    Raises:
        RuntimeError: ``NATS_URL`` or ``REDIS_URL`` is set (a cluster stack starts its own servers),
            or a server did not come up. TimeoutError: the cluster or the group did not form.
    """
    if given := [name for name in ("NATS_URL", "REDIS_URL") if os.environ.get(name)]:
        raise RuntimeError(f"a cluster stack starts its own servers: unset {' and '.join(given)}")
    with (
        nats_cluster(state_dir / "nats-cluster", size, nats_config) as cluster,
        sentinel_group(state_dir / "redis-sentinel") as group,
    ):
        yield ClusterServers(cluster, group)


def replica_names(service: str, replicas: int) -> list[str]:
    """The process names of ``service``'s replicas: ``policy``, ``policy-2`` and so on."""
    return [service if index == 1 else f"{service}-{index}" for index in range(1, replicas + 1)]
