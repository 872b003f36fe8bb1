"""Fixtures of the SDK's connected tests: a nats-server of the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from toolgate.devstack.servers import ServerProcess, nats_server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A nats-server (JetStream) on a free port, stopped after the test."""
    with nats_server(tmp_path / "nats") as process:
        yield process
