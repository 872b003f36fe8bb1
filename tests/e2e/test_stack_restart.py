"""Restarting everything, as a restart of ``effectgate up`` does, loses no pending approval and no key.

``effectgate up`` runs redis-server with an append-only file fsynced before every reply and
nats-server with its JetStream store under the state directory; this module's stack does
the same, then stops every service and both servers and starts them again.
"""

from __future__ import annotations

from typing import Any

import pytest

from effectgate.cli.stack.launch import SERVICES
from effectgate.cli.stack.readiness import wait_ready

pytestmark = [pytest.mark.e2e, pytest.mark.fault]


@pytest.fixture(scope="module")
def stack_redis_persistent() -> bool:
    return True


async def _restart_everything(gate: Any) -> None:
    gate.stack.stop_all()
    for server in ("redis", "nats"):
        gate.stack.servers[server].restart()
    gate.stack.start("registry")
    await wait_ready(gate.stack, ("registry",))
    for service in SERVICES[1:]:
        gate.stack.start(service)
    await wait_ready(gate.stack, SERVICES[1:])


async def test_pending_approvals_and_used_keys_survive_a_restart_of_everything(gate: Any, new_id: Any) -> None:
    agent, name, key = gate.agent(), new_id("kept-") + ".txt", new_id("k")
    waiting = await gate.submit(agent, "write", {"path": name, "content": "after the restart"})
    approval = await gate.pending(waiting)
    done = await gate.call(gate.agent(2), "write", {"path": name + ".done", "content": "x"}, key=key)
    assert done.outcome == "succeeded"

    await _restart_everything(gate)

    assert (await gate.pending(waiting))["approval_id"] == approval["approval_id"]
    assert (await gate.decide("alice", approval["approval_id"]))["ok"]
    issued = await gate.receipt(agent, waiting, timeout_s=60)
    assert issued.outcome == "succeeded", issued.reason
    replay = await gate.call(done.principal, "write", {"path": name + ".done", "content": "x"}, key=key)
    assert (replay.outcome, replay.replay_of) == ("replayed", done.request_id)
