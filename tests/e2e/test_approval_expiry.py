"""An approval nobody answers expires, and its request ends denied (guarantees 2 and 4)."""

from __future__ import annotations

from typing import Any

import pytest

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ApprovalRequested
from effectgate.shared.stores.stream import fetch_last

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Any) -> dict[str, str]:
    return {"EFFECTGATE_APPROVALS_TTL_S": "1", "EFFECTGATE_APPROVALS_SWEEP_INTERVAL_S": "0.2"}


async def test_unanswered_approval_expires_and_the_request_is_denied(gate: Any, watch: Any, new_id: Any) -> None:
    agent, name = gate.agent(), new_id("late-") + ".txt"
    watch.watch(gate.paths.sandbox)
    request_id = await gate.submit(agent, "write", {"path": name, "content": "too late"})

    issued = await gate.receipt(agent, request_id, timeout_s=15)
    assert (issued.outcome, issued.reason_code) == ("denied", "approval_expired"), issued.reason
    assert await gate.count(Subjects.approval("rejected", agent, request_id)) == 1

    requested = await fetch_last(gate.js, Subjects.approval("requested", agent, request_id))
    assert isinstance(requested, ApprovalRequested)
    assert not await gate.is_pending(request_id)
    late = await gate.decide("alice", requested.approval_id)
    assert late["ok"] is False and late["reason_code"] in ("not_pending", "expired"), late

    await gate.settle()
    assert not (gate.paths.sandbox / name).exists()
    assert [event for event in watch.poll() if event[1] == name] == []
    assert await gate.count(Subjects.receipt(agent, request_id)) == 1
