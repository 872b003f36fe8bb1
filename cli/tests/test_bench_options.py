"""``effectgate bench --cluster N --replicas N``: what is refused before anything starts, how the topology is named."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from effectgate.cli.app import app
from effectgate.cli.bench.report import topology_line
from effectgate.cli.bench.topology import Topology, stack_messages
from effectgate.cli.stack.launch import replicas_per_service
from effectgate.cli.stack.system import Stack


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--cluster", "2"], "--cluster takes 1, 3 or 5 nodes"),
        (["--cluster", "4"], "not 4"),
        (["--replicas", "0"], "--replicas"),
        (["--replicas", "5"], "--replicas"),
        (["--replicas", "two"], "--replicas"),
    ],
)
def test_a_topology_that_cannot_be_run_is_refused_naming_the_option(argv: list[str], said: str) -> None:
    done = CliRunner().invoke(app, ["bench", "--calls", "1", *argv])

    assert done.exit_code == 2, done.output
    assert said in done.output and "Traceback" not in done.output


@pytest.mark.parametrize(("cluster", "asked", "each"), [(1, None, 1), (3, None, 2), (1, 2, 2), (3, 1, 1), (5, 4, 4)])
def test_service_replicas_default_to_two_on_a_cluster_else_one(cluster: int, asked: int | None, each: int) -> None:
    assert replicas_per_service(cluster, asked) == each


def test_a_stack_without_a_process_of_each_service_is_refused() -> None:
    with pytest.raises(ValueError, match="not 0"):
        replicas_per_service(1, 0)


def test_the_topology_line_names_nodes_stream_replicas_and_service_processes() -> None:
    single = topology_line(Topology(1, 1, 1))
    assert single == "on one nats-server, the record stream at 1 replica, 1 process of each service"
    clustered = topology_line(Topology(3, 3, 2))
    assert clustered == "on a 3-node NATS cluster, the record stream at 3 replicas, 2 processes of each service"


def test_messages_of_servers_not_started_here_are_not_counted(tmp_path: Path) -> None:
    given = Stack(tmp_path, "nats://127.0.0.1:4222", "redis://127.0.0.1:6379", {})

    assert stack_messages(given) is None
