"""A local NATS cluster: N nats-server processes with routes between them, JetStream on each.

Used by the cluster tests (the ``cluster`` fixture of :mod:`effectgate.devstack.testing`).
Each node listens on loopback ports chosen here (client, cluster route, monitoring), has its
own name (``n1``, ``n2``, …) and its own JetStream store directory, so a node that is killed
or stopped comes back with :meth:`NatsCluster.restart` on the same ports with the same store.
An optional config (the secured stack's users and permissions,
:mod:`effectgate.shared.config.nats_server`) is given to every node with ``-c``; the node's
name and ports given on the command line override the file's (nats-server merges flags last).
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from effectgate.devstack.processes import spawn
from effectgate.devstack.servers import _nats_ready
from effectgate.devstack.starting import ServerProcess, find_binary, free_port, ready_or_stopped

__all__ = ["CLUSTER_NAME", "NatsCluster", "NatsNode", "nats_cluster"]

CLUSTER_NAME = "effectgate"
"""The ``--cluster_name`` every node is started with."""


@dataclass
class NatsNode:
    """One node of a :class:`NatsCluster`.

    Attributes:
        name: its server name (``n1`` …).
        client_port / route_port / monitoring_port: the loopback ports it listens on.
        workdir: its store directory, ports file and log.
        server: its process (``None`` before the first start).
    """

    name: str
    client_port: int
    route_port: int
    monitoring_port: int
    workdir: Path
    server: ServerProcess | None = None

    @property
    def url(self) -> str:
        """Its client URL, ``nats://127.0.0.1:<port>``."""
        return f"nats://127.0.0.1:{self.client_port}"

    @property
    def monitoring_url(self) -> str:
        """Its monitoring base URL, ``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.monitoring_port}"

    def running(self) -> bool:
        """Whether its process is alive."""
        return self.server is not None and self.server.process.poll() is None


def _get_json(url: str, timeout_s: float = 1.0) -> Any:
    """The JSON body of ``url``; ``None`` when it cannot be fetched or is not JSON (a node still starting)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


class NatsCluster:
    """A running cluster: every node's URLs, a node killed or restarted by name, who leads what.

    Args:
        nodes: the nodes, started.
        timeout_s: how long :meth:`restart` and :meth:`wait_ready` wait, seconds.
    """

    def __init__(self, nodes: list[NatsNode], timeout_s: float) -> None:
        self.nodes = {node.name: node for node in nodes}
        self.timeout_s = timeout_s

    @property
    def urls(self) -> list[str]:
        """Every node's client URL, in node order (give them all to a client: it fails over among them)."""
        return [node.url for node in self.nodes.values()]

    @property
    def monitoring_urls(self) -> dict[str, str]:
        """Node name to its monitoring base URL."""
        return {name: node.monitoring_url for name, node in self.nodes.items()}

    def kill(self, name: str) -> None:
        """SIGKILL node ``name`` (fault injection). Raises ``KeyError``: no such node."""
        self._server(name).kill()

    def stop(self, name: str) -> None:
        """Stop node ``name`` gracefully (SIGTERM). Raises ``KeyError``: no such node."""
        self._server(name).stop()

    def restart(self, name: str) -> None:
        """Start node ``name`` again (same ports, same store) and wait until it serves JetStream.

        Raises:
            KeyError: no such node. RuntimeError / TimeoutError: it did not come up.
        """
        self._server(name).restart(self.timeout_s)

    def stop_all(self) -> None:
        """Stop every node."""
        for node in self.nodes.values():
            if node.server is not None:
                node.server.stop()

    def meta_leader(self) -> str | None:
        """The name of the JetStream meta leader as a running node sees it; ``None``: none elected."""
        for node in self._running():
            found = _get_json(node.monitoring_url + "/jsz")
            if isinstance(found, dict) and (leader := (found.get("meta_cluster") or {}).get("leader")):
                return str(leader)
        return None

    def stream_leader(self, stream: str) -> str | None:
        """The name of the node leading ``stream`` (``/jsz?streams=true``); ``None``: no leader known now."""
        for node in self._running():
            found = _get_json(node.monitoring_url + "/jsz?accounts=true&streams=true")
            for account in (found or {}).get("account_details") or []:
                for detail in account.get("stream_detail") or []:
                    if detail.get("name") == stream and (leader := (detail.get("cluster") or {}).get("leader")):
                        return str(leader)
        return None

    def wait_ready(self) -> None:
        """Wait until every running node is healthy with JetStream current and a meta leader is elected.

        Raises:
            TimeoutError: not so within ``timeout_s`` seconds.
        """
        deadline = time.monotonic() + self.timeout_s
        while not (self.meta_leader() and all(self._healthy(node) for node in self._running())):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"NATS cluster not ready after {self.timeout_s}s (meta leader: {self.meta_leader()})"
                )
            time.sleep(0.1)

    @staticmethod
    def _healthy(node: NatsNode) -> bool:
        return bool(_get_json(node.monitoring_url + "/healthz") == {"status": "ok"})

    def _running(self) -> list[NatsNode]:
        return [node for node in self.nodes.values() if node.running()]

    def _server(self, name: str) -> ServerProcess:
        server = self.nodes[name].server
        if server is None:
            raise KeyError(f"node {name!r} was never started")
        return server


def _argv(node: NatsNode, peers: list[NatsNode], config: Path | None) -> list[str]:
    """The command line of ``node``: its ports, name, store, the routes to every peer, then the config."""
    routes = ",".join(f"nats://127.0.0.1:{peer.route_port}" for peer in peers if peer is not node)
    argv = [find_binary("nats-server", "NATS_SERVER_BIN"), "-a", "127.0.0.1", "-p", str(node.client_port)]
    argv += ["-m", str(node.monitoring_port), "-n", node.name, "-js", "-sd", str(node.workdir / "jetstream")]
    argv += ["--cluster_name", CLUSTER_NAME, "--cluster", f"nats://127.0.0.1:{node.route_port}", "--routes", routes]
    return [*argv, "--ports_file_dir", str(node.workdir), *(["-c", str(config)] if config else [])]


def _start_node(node: NatsNode, peers: list[NatsNode], config: Path | None, timeout_s: float) -> None:
    """Start ``node`` and wait until it serves JetStream (its own ports file, never another program's)."""
    node.workdir.mkdir(parents=True, exist_ok=True)
    log = node.workdir / "nats.log"
    process = spawn(_argv(node, peers, config), log)
    node.server = ServerProcess(node.url, process, log, lambda started: _nats_ready(node.workdir, started.pid))
    node.server.ports = {"nats": node.client_port, "nats-route": node.route_port}
    node.server.ports["nats-monitoring"] = node.monitoring_port
    ready_or_stopped(node.server, partial(_nats_ready, node.workdir, process.pid), timeout_s)


def _started(workdir: Path, size: int, config: Path | None, timeout_s: float) -> NatsCluster:
    """One attempt: ``size`` nodes on fresh free ports, started together (JetStream waits for its peers)."""
    nodes = [NatsNode(f"n{i}", free_port(), free_port(), free_port(), workdir / f"n{i}") for i in range(1, size + 1)]
    cluster = NatsCluster(nodes, timeout_s)
    try:
        for node in nodes:
            _start_node(node, nodes, config, timeout_s)
        cluster.wait_ready()
    except BaseException:
        cluster.stop_all()
        raise
    return cluster


@contextlib.contextmanager
def nats_cluster(
    workdir: Path, size: int = 3, config: Path | None = None, timeout_s: float = 30.0, attempts: int = 3
) -> Iterator[NatsCluster]:
    """Run a ``size``-node NATS cluster with JetStream under ``workdir``, stopped on exit.

    Ready when every node serves JetStream, reports healthy and a meta leader is elected. A
    start that loses a port to another program (a node exits) is retried on fresh ports, up
    to ``attempts`` times.

    Args:
        workdir: one sub-directory per node (``n1`` …): store, ports file, ``nats.log``.
        size: number of nodes (3 tolerates one down).
        config: optional nats-server config given to every node (users, permissions).
        timeout_s: how long one node, and then the whole cluster, may take to be ready.
        attempts: starts tried, each on fresh ports.

    Raises:
        FileNotFoundError: no nats-server binary.
        RuntimeError / TimeoutError: the cluster did not come up.
    """
    for attempt in range(attempts):
        try:
            cluster = _started(workdir / f"start{attempt}", size, config, timeout_s)
            break
        except RuntimeError:
            if attempt == attempts - 1:
                raise
    try:
        yield cluster
    finally:
        cluster.stop_all()
