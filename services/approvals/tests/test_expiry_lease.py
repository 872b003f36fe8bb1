"""The expiry sweep runs on the replica holding the ``approvals-expiry`` lease only (real NATS KV)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from nats.js import JetStreamContext

from effectgate.approvals.app import _sweep
from effectgate.devstack.leases import runs_of_two_replicas
from effectgate.shared.runtime.leadership import Leadership

pytestmark = pytest.mark.connected


def _runtime(sweeps: list[str], name: str) -> Any:
    async def has_epoch() -> bool:
        return True

    async def expire_due() -> int:
        sweeps.append(name)
        return 0

    store = SimpleNamespace(has_epoch=has_epoch)
    return SimpleNamespace(approvals=SimpleNamespace(store=store, expire_due=expire_due), rebuilder=None)


async def test_of_two_replicas_only_the_lease_holder_sweeps(js: JetStreamContext, ns: str) -> None:
    async def sweep(ran: list[str], name: str, lease: Leadership) -> None:
        await _sweep(_runtime(ran, name), 0.05, lease)

    sweeps = await runs_of_two_replicas(js, ns, sweep)
    assert sweeps and set(sweeps) == {"one"}, sweeps
