"""End-to-end fixtures: one whole effectgate system per test module, real processes.

Each module gets its own nats-server, redis-server and the five services (started by
:func:`effectgate.cli.stack.launch.running_stack` in a sync fixture, outside the session event
loop). ``NATS_URL`` / ``REDIS_URL`` are removed while a stack starts, so no two modules
share a stream or a Redis. Tests isolate themselves inside a module by taking fresh
principals from :meth:`Gate.agent` (the rate limit is per principal and tool) and fresh
file names.

A module changes its stack by overriding ``stack_env`` (extra service environment),
``stack_redis_url`` (a Redis URL to use instead of starting one),
``stack_policy_required`` (``False``: start although the policy service is not ready) or
``stack_cluster`` (3: the stack of ``effectgate up --cluster 3``, a 3-node NATS cluster with the
bus at R3, Redis with a replica and three Sentinels, two replicas of every service).

The drivers the fixtures build (:class:`~support.Gate`, :class:`~support.Paths`,
:class:`~support.DirWatch`) are typed in ``support.py``, where tests import them from.

``EFFECTGATE_E2E_AUTH`` picks the NATS mode: ``secured`` (default) runs nats-server with the
generated users and permissions (``effectgate.contracts.bus.nats_permissions``) for the module's
principal directory; each service, agent and approver connects as its own user, and the
tests observe (and forge events) as ``admin``. ``open`` runs nats-server without users.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
import pytest_asyncio

from effectgate.cli.stack.launch import AuthMode, running_stack
from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus.nats_permissions import ADMIN

from .support import DirWatch, Gate, Paths, make_tree
from .surface_support import Surfaces


def _auth_mode() -> AuthMode:
    mode = os.environ.get("EFFECTGATE_E2E_AUTH", "secured")
    if mode not in ("secured", "open"):
        raise pytest.UsageError(f"EFFECTGATE_E2E_AUTH must be secured or open, not {mode!r}")
    return "open" if mode == "open" else "secured"


AUTH = _auth_mode()


@pytest.fixture(scope="module")
def e2e_paths(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    """A fresh sandbox (with escaping symlinks), outside dirs and principal directory."""
    return make_tree(tmp_path_factory.mktemp("e2e"))


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Paths) -> dict[str, str]:
    """Extra service environment of this module's stack (override in a module)."""
    return {}


@pytest.fixture(scope="module")
def stack_redis_url() -> str | None:
    """A Redis URL for the services instead of a started redis-server (override in a module)."""
    return None


@pytest.fixture(scope="module")
def stack_redis_persistent() -> bool:
    """Whether the started redis-server keeps what it acknowledged across a restart (override in a module)."""
    return False


@pytest.fixture(scope="module")
def stack_policy_required() -> bool:
    """Whether the stack must start with a usable policy (override in a module that runs without one)."""
    return True


@pytest.fixture(scope="module")
def stack_cluster() -> int:
    """NATS nodes of this module's stack: 1, or 3 for a clustered stack (override in a module)."""
    return 1


@pytest.fixture(scope="module")
def stack(
    e2e_paths: Paths,
    stack_env: dict[str, str],
    stack_redis_url: str | None,
    stack_redis_persistent: bool,
    stack_policy_required: bool,
    stack_cluster: int,
    repo_root: Path,
) -> Iterator[Stack]:
    """The running system: nats-server, redis-server and the five services (clustered: see ``stack_cluster``)."""
    env = {
        "EFFECTGATE_POLICY_POLICY_FILE": str(repo_root / "deploy/policy/policy.cedar"),
        "EFFECTGATE_POLICY_PRINCIPALS_FILE": str(e2e_paths.principals),
        "EFFECTGATE_APPROVALS_PRINCIPALS_FILE": str(e2e_paths.principals),
        "EFFECTGATE_REGISTRY_DESCRIPTORS_DIR": str(repo_root / "deploy/tools"),
        "EFFECTGATE_EXECUTOR_SANDBOX_ROOT": str(e2e_paths.sandbox),
        **stack_env,
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("NATS_URL", raising=False)
        if stack_redis_url:
            patch.setenv("REDIS_URL", stack_redis_url)
        else:
            patch.delenv("REDIS_URL", raising=False)
        started = running_stack(
            e2e_paths.state,
            env,
            auth=AUTH,
            redis_persistent=stack_redis_persistent,
            policy_required=stack_policy_required,
            admin=True,
            cluster=stack_cluster,
        )
        with started as running:
            yield running


async def _refuses_anonymous(url: str) -> None:
    async def quiet(error: Exception) -> None:
        pass

    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(url, error_cb=quiet, allow_reconnect=False)


@pytest_asyncio.fixture(scope="module")
async def gate(stack: Stack, e2e_paths: Paths) -> AsyncIterator[Gate]:
    """A :class:`Gate` on this module's stack (a secured stack is checked to refuse anonymous clients)."""
    if stack.credentials:
        await _refuses_anonymous(stack.nats_servers[0])
    nc = await nats.connect(stack.nats_servers, **stack.connect_options(ADMIN))
    driver = Gate(stack, e2e_paths, nc)
    yield driver
    await driver.close()
    await nc.close()


@pytest.fixture(scope="module")
def surfaces(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Surfaces]:
    """MCP surfaces of this module's stack (:mod:`surface_support`), stopped with the module."""
    started = Surfaces(stack, tmp_path_factory.mktemp("surfaces"))
    yield started
    started.stop_all()


@pytest.fixture
def new_id() -> Any:
    """``new_id(prefix)``: a fresh subject-safe id (request ids, idempotency keys, file names)."""
    return lambda prefix="t": f"{prefix}{uuid.uuid4().hex[:16]}"


@pytest.fixture
def watch() -> Iterator[DirWatch]:
    """A :class:`DirWatch`, closed after the test."""
    watcher = DirWatch()
    yield watcher
    watcher.close()
