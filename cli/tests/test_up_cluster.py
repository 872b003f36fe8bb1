"""``effectgate up --cluster N``: a node count that cannot keep a majority is refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from effectgate.cli.app import app
from effectgate.cli.stack.clustered import ClusterSizeInvalid, checked_size, replica_names
from effectgate.cli.stack.credentials import BusCredentials


@pytest.mark.parametrize("nodes", [0, 2, 4, 7])
def test_up_refuses_a_cluster_size_without_a_surviving_majority_and_starts_nothing(tmp_path: Path, nodes: int) -> None:
    state = tmp_path / "state"

    done = CliRunner().invoke(app, ["up", "--cluster", str(nodes), "--state-dir", str(state)])

    assert done.exit_code == 2, done.output
    assert "--cluster takes 1, 3 or 5 nodes" in done.output and f"not {nodes}" in done.output
    assert not state.exists()


@pytest.mark.parametrize("nodes", [1, 3, 5])
def test_the_node_counts_that_survive_a_loss_are_taken(nodes: int) -> None:
    assert checked_size(nodes) == nodes


def test_a_size_refused_names_itself() -> None:
    with pytest.raises(ClusterSizeInvalid, match="not 2"):
        checked_size(2)


def test_replicas_are_named_after_their_service() -> None:
    assert replica_names("policy", 2) == ["policy", "policy-2"]
    assert replica_names("audit", 1) == ["audit"]


def test_a_users_url_of_a_cluster_carries_its_credentials_to_every_node() -> None:
    credentials = BusCredentials({"operator": "p/w"}, {})

    url = credentials.url("nats://127.0.0.1:1,nats://127.0.0.1:2", "operator")

    assert url == "nats://operator:p%2Fw@127.0.0.1:1,nats://operator:p%2Fw@127.0.0.1:2"
