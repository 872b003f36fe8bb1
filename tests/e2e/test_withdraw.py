"""A requester withdraws its own pending call, and sees where its call stands (guarantees 2 and 5).

A withdrawn call ends in exactly one receipt, ``denied`` (``withdrawn``), nothing ran and its
approval can no longer be granted. Only the principal that made the call can withdraw it:
the principal is the subject token, and NATS lets agent ``<p>`` publish only on
``tg.approvals.withdraw.<p>``. Every other withdrawal answers ``not_pending`` and changes nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import nats
import pytest

from effectgate.contracts.approval_ids import approval_id_for
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.bus.nats_permissions import agent_user
from effectgate.contracts.vocabulary import Verdict

pytestmark = pytest.mark.e2e


async def _pending_write(gate: Any, new_id: Any) -> tuple[str, str, str]:
    """``(agent, request id, file name)`` of a fresh write waiting for its approval."""
    agent, name = gate.agent(), new_id("withdraw-") + ".txt"
    request_id = await gate.submit(agent, "write", {"path": name, "content": "never"})
    await gate.pending(request_id)
    return agent, request_id, name


async def test_a_withdrawn_call_ends_denied_withdrawn_and_nothing_runs(gate: Any, new_id: Any) -> None:
    agent, request_id, name = await _pending_write(gate, new_id)
    client = await gate.client(agent)
    reply = await client.withdraw(request_id)
    assert (reply.ok, reply.reason_code, reply.approval_id) == (True, "withdrawn", client.approval_id(request_id))

    issued = await client.receipt(request_id, timeout_s=20.0)
    assert (issued.outcome, issued.reason_code) == ("denied", "withdrawn"), issued.reason
    assert issued.reason == f"withdrawn by the requester {agent}"
    assert not await gate.is_pending(request_id)
    late = await gate.decide("alice", reply.approval_id)
    assert (late["ok"], late["reason_code"]) == (False, "not_pending")
    again = await client.withdraw(request_id)
    assert (again.ok, again.reason_code) == (False, "not_pending")

    await gate.settle()
    assert not (gate.paths.sandbox / name).exists()
    assert await gate.count(Subjects.receipt(agent, request_id)) == 1
    kinds = [record["event_type"] for record in await gate.trail(request_id)]
    ended = [
        "tool.requested",
        "decision.made",
        "decision.made",
        "approval.requested",
        "approval.rejected",
        "receipt.issued",
    ]
    assert kinds == [*ended, "security.event"], "alice's late answer is recorded as refused"


async def test_a_call_that_is_not_pending_is_not_withdrawn(gate: Any, new_id: Any) -> None:
    agent = gate.agent()
    client = await gate.client(agent)
    executed = await gate.call(agent, "read", {"path": "hello.txt"})
    denied = await gate.call(agent, "read", {"path": "hello.txt"}, tool="no_such_tool")
    granted = await gate.submit(agent, "write", {"path": new_id("granted-") + ".txt", "content": "ran"})
    assert (await gate.decide("alice", (await gate.pending(granted))["approval_id"]))["ok"]
    assert (await gate.receipt(agent, granted)).outcome == "succeeded"

    for request_id in (executed.request_id, denied.request_id, granted, new_id("unknown-")):
        reply = await client.withdraw(request_id)
        assert (reply.ok, reply.reason_code) == (False, "not_pending"), (request_id, reply)
    await gate.settle()
    for issued in (executed, denied):
        assert await gate.count(Subjects.receipt(agent, issued.request_id)) == 1
    assert (await gate.receipt(agent, granted)).outcome == "succeeded"


async def test_another_principal_cannot_withdraw_a_call_through_its_own_subject(gate: Any, new_id: Any) -> None:
    owner, request_id, name = await _pending_write(gate, new_id)
    other = await gate.client(gate.agent())
    reply = await other.withdraw(request_id)  # asks on tg.approvals.withdraw.<other>: about other's requests only
    assert (reply.ok, reply.reason_code) == (False, "not_pending")
    assert await other.decision(request_id) is None
    await gate.settle()
    assert await gate.is_pending(request_id)
    assert await gate.count(Subjects.receipt(owner, request_id)) == 0
    assert not (gate.paths.sandbox / name).exists()


async def test_an_agent_cannot_publish_on_another_principals_withdraw_subject(gate: Any, new_id: Any) -> None:
    """Without NATS users (``EFFECTGATE_E2E_AUTH=open``) nothing is refused: the subject token is then anyone's."""
    owner, request_id, _ = await _pending_write(gate, new_id)
    errors: list[str] = []

    async def on_error(error: Exception) -> None:
        errors.append(str(error).lower())

    user = agent_user(gate.agent())
    nc = await nats.connect(gate.stack.nats_url, error_cb=on_error, **gate.stack.connect_options(user))
    subject = Rpc.approvals_withdraw(owner)
    try:
        answer = asyncio.ensure_future(nc.request(subject, f'{{"request_id": "{request_id}"}}'.encode(), timeout=5))
        if not gate.stack.credentials:
            assert b'"withdrawn"' in (await answer).data
            return
        with pytest.raises(nats.errors.TimeoutError):
            await answer
    finally:
        await nc.close()
    assert any(f'permissions violation for publish to "{subject.lower()}"' in error for error in errors), errors
    assert await gate.is_pending(request_id)
    assert await gate.count(Subjects.receipt(owner, request_id)) == 0


async def test_decision_tells_a_pending_call_and_nothing_of_an_unknown_one(gate: Any, new_id: Any) -> None:
    agent, request_id, _ = await _pending_write(gate, new_id)
    client = await gate.client(agent)
    decision = await client.decision(request_id)
    assert decision is not None
    assert (decision.verdict, decision.request_id, decision.principal) == (Verdict.NEEDS_APPROVAL, request_id, agent)
    listed = await gate.pending(request_id)
    assert listed["approval_id"] == client.approval_id(request_id) == approval_id_for(agent, request_id)
    assert await client.decision(new_id("unknown-")) is None
    assert await client.decision("not a token") is None
    assert (await client.withdraw(request_id)).ok  # leaves nothing pending behind


@pytest.mark.parametrize(
    "body",
    [b"not json", b"{}", b'{"request_id": "r1", "principal": "a1-00"}', b'{"request_id": "has space"}'],
)
async def test_a_malformed_withdraw_is_answered_malformed(gate: Any, new_id: Any, body: bytes) -> None:
    agent, request_id, _ = await _pending_write(gate, new_id)
    nc = await nats.connect(gate.stack.nats_url, **gate.stack.connect_options(agent_user(agent)))
    try:
        reply = await nc.request(Rpc.approvals_withdraw(agent), body, timeout=5)
    finally:
        await nc.close()
    assert b'"ok":false' in reply.data and b'"reason_code":"malformed"' in reply.data, reply.data
    assert await gate.is_pending(request_id)
    assert (await (await gate.client(agent)).withdraw(request_id)).ok
