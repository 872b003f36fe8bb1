"""Fixtures of the worker's connected tests: a nats-server of the test's own, the executor's keys, a fake dispatcher."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
import pytest_asyncio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client

from effectgate.contracts.integrity.signing import generate_keypair, load_private_key
from effectgate.devstack.servers import ServerProcess, nats_server

sys.path.insert(0, str(Path(__file__).parent / "serving_modules"))  # the modules a test worker serves

from worker_held_tools import Held


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A nats-server on a free port, stopped after the test."""
    with nats_server(tmp_path / "nats") as process:
        yield process


@pytest_asyncio.fixture
async def nc(server: ServerProcess) -> AsyncIterator[Client]:
    """The executor's side of the test: a plain connection to :func:`server`."""
    connection = await nats.connect(server.url)
    yield connection
    await connection.close()


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    """A public keys directory holding the executor's ``receipts.pub`` (its private half beside it)."""
    generate_keypair(tmp_path / "keys", "receipts")
    return tmp_path / "keys"


@pytest.fixture
def executor_key(keys: Path) -> Ed25519PrivateKey:
    """The executor's signing key."""
    return load_private_key(keys / "receipts.key")


@pytest.fixture
def held() -> Held:
    """A fake dispatcher whose ``held`` tool waits for :meth:`Held.release`."""
    return Held()
