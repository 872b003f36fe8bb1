"""What a bench stack is made of, and where its processes' counters and logs are.

One nats-server or a NATS cluster (:mod:`effectgate.cli.stack.clustered`), each service run one
or more times (``policy``, ``policy-2`` …): the CPU, message counts and log lines a run reads
are summed or merged over all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nats.aio.client import Client

from effectgate.cli.bench import stages
from effectgate.cli.bench.processes import nats_messages
from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus import catalog

__all__ = ["Topology", "handler_ms", "read_topology", "server_pids", "service_pids", "stack_messages"]


@dataclass(frozen=True)
class Topology:
    """What the measured stack ran on.

    Attributes:
        nodes: nats-server processes (1, or the cluster's nodes).
        stream_replicas: replicas of the record stream, as the server reports its configuration.
        service_replicas: processes of each service (``policy`` … ``policy-<n>``).
    """

    nodes: int
    stream_replicas: int
    service_replicas: int


async def read_topology(stack: Stack, nc: Client) -> Topology:
    """The :class:`Topology` of ``stack`` (``nc``: a connection allowed to read the record stream's info).

    Raises:
        nats.errors.Error: the stream's info could not be read.
    """
    info = await nc.jetstream().stream_info(catalog.STREAM)
    return Topology(len(stack.nats_servers), info.config.num_replicas or 1, len(stack.replicas("policy")))


def server_pids(stack: Stack) -> dict[str, int]:
    """``{"<server>-server": pid}`` of every server started for ``stack`` (every node, Redis, Sentinel)."""
    return {f"{name}-server": server.process.pid for name, server in stack.servers.items()}


def service_pids(stack: Stack) -> dict[str, int]:
    """``{process name: pid}`` of every service process, replicas included (``policy-2``)."""
    return {name: process.pid for name, process in stack.processes.items()}


def _nats_nodes(stack: Stack) -> list[tuple[Path, int]]:
    """``(ports file directory, pid)`` of each nats-server started for ``stack`` (none when given by URL)."""
    if stack.cluster is not None:
        return [(node.workdir, node.server.process.pid) for node in stack.cluster.nodes.values() if node.server]
    single = stack.servers.get("nats")
    return [] if single is None else [(stack.state_dir / "nats", single.process.pid)]


def stack_messages(stack: Stack) -> int | None:
    """Messages in plus out of every nats-server so far, summed (:func:`nats_messages`).

    On a cluster this counts what the nodes route to each other as well. ``None`` when the
    servers were not started here, or one node's count could not be read.
    """
    counts = [nats_messages(ports_dir, pid) for ports_dir, pid in _nats_nodes(stack)]
    if not counts or None in counts:
        return None
    return sum(count for count in counts if count is not None)


def handler_ms(stack: Stack, service: str, consumer: str) -> dict[str, float]:
    """:func:`effectgate.cli.bench.stages.log_handler_ms` merged over every replica of ``service``."""
    logs, found = stack.state_dir / "logs", {}
    for name in stack.replicas(service) or [service]:
        found.update(stages.log_handler_ms(logs, name, consumer))
    return found
