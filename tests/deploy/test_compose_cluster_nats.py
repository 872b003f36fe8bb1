"""The compose cluster profile's NATS nodes form a real JetStream cluster from their compose entries.

Three nats-servers run ``deploy/nats/nats-cluster.conf`` (with nats-tls.conf and nats.conf) with each
node's command and environment from docker-compose.yml as the cluster profile resolves them: the node
names in ``NATS_ROUTE_1..3`` become local route ports, the certificate path a temporary directory, and each
node's cluster port its own. The wheel's server (2.15) runs it (``handshake_first``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from effectgate.cli.commands.tls import generate_tls
from effectgate.cli.stack.credentials import env_lines
from effectgate.contracts.directory import load_directory
from effectgate.devstack.starting import find_binary, free_port
from tests.deploy.nats_nodes import Node, until
from tests.deploy.settings_env import ROOT
from tests.deploy.test_compose_cluster import CLUSTER_ENV, active, nats_nodes

pytestmark = [pytest.mark.connected, pytest.mark.fault, pytest.mark.timing, pytest.mark.nats_2_10]

NATS = ROOT / "deploy" / "nats"
ROUTE_PASSWORD = "Route5ecret"
NODES = nats_nodes(active({**CLUSTER_ENV, "NATS_ROUTE_PASSWORD": ROUTE_PASSWORD}))
"""The nodes as compose resolves them with the cluster env and a .env holding NATS_ROUTE_PASSWORD."""


def lay_out(config_dir: Path, tls_dir: Path, route_port: int) -> None:
    cluster = (NATS / "nats-cluster.conf").read_text()
    tls = (NATS / "nats-tls.conf").read_text()
    assert "  port: 6222\n" in cluster and "/etc/nats/tls" in tls
    config_dir.mkdir(parents=True)
    (config_dir / "nats-cluster.conf").write_text(cluster.replace("  port: 6222\n", f"  port: {route_port}\n"))
    (config_dir / "nats-tls.conf").write_text(tls.replace("/etc/nats/tls", str(tls_dir)))
    (config_dir / "nats.conf").write_text((NATS / "nats.conf").read_text())


def environment(service: dict[str, Any], route_ports: dict[str, int]) -> dict[str, str]:
    """The node's compose environment, node names dialled on loopback."""
    found = {}
    for name, value in service["environment"].items():
        value = ROUTE_PASSWORD if value is None else str(value)  # a bare key: compose passes .env's value
        for node, port in route_ports.items():
            value = value.replace(f"@{node}:6222", f"@127.0.0.1:{port}")
        if not value.startswith("${"):  # the users' passwords come from the test's environment
            found[name] = value
    return found


def server_name(service: str) -> str:
    """The node's NATS_SERVER_NAME, also the name the routes dial it by."""
    return str(NODES[service]["environment"]["NATS_SERVER_NAME"])


def start(work: Path, name: str, route_ports: dict[str, int]) -> Node:
    service, client, monitor = NODES[name], free_port(), free_port()
    lay_out(work / name / "etc", work / "tls", route_ports[server_name(name)])
    command = [str(part) for part in service["command"]]
    command[command.index("-sd") + 1] = str(work / name / "data")
    command[command.index("-c") + 1] = str(work / name / "etc" / "nats-cluster.conf")
    if "-m" in command:
        command[command.index("-m") + 1] = str(monitor)
    else:
        command += ["-m", str(monitor)]
    command += ["-a", "127.0.0.1", "-p", str(client), "-l", str(work / f"{name}.log")]
    env = {**os.environ, **environment(service, route_ports)}
    return Node(
        name, client, monitor, subprocess.Popen([find_binary("nats-server", "NATS_SERVER_BIN"), *command], env=env)
    )


@pytest.fixture
def nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Node]]:
    generate_tls(tmp_path / "tls", ["nats", "localhost"])
    monkeypatch.delenv("NATS_SERVER_BIN", raising=False)
    for line in env_lines(load_directory(ROOT / "deploy/policy/principals.toml")).splitlines():
        monkeypatch.setenv(*line.split("=", 1))
    route_ports = {server_name(name): free_port() for name in NODES}
    started: list[Node] = []
    try:
        started.extend(start(tmp_path, name, route_ports) for name in NODES)
        yield started
    finally:
        for node in started:
            node.stop()


def test_the_three_compose_nodes_elect_a_leader_and_survive_one_gone(nodes: list[Node]) -> None:
    first = until(nodes[0].leader, 30)
    assert first in {server_name(name) for name in NODES}
    stopped = next(node for node in nodes if server_name(node.name) == first)
    stopped.stop()
    survivor = next(node for node in nodes if node is not stopped)
    assert until(lambda: (found := survivor.leader()) != first and found, 30)
