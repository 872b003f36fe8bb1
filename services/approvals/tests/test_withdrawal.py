"""Withdrawal by the requester: only its own pending call, once, as a signed rejection; in memory and on Redis."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis

from effectgate.approvals.domain import ApprovalState
from effectgate.approvals.memory import InMemoryApprovalStore
from effectgate.approvals.withdrawal import withdraw_bytes
from effectgate.contracts.events import ApprovalGranted, ApprovalRejected
from effectgate.contracts.integrity.signing import verify_event
from effectgate.contracts.rpc.approvals import MAX_WITHDRAW_BYTES, WithdrawReply


async def _withdraw(kit: Any, rid: str, principal: str = "demo-agent") -> WithdrawReply:
    body = msgspec.json.encode({"request_id": kit.ns + rid})
    return await withdraw_bytes(kit.approvals, principal, body)


def _rejected(kit: Any) -> list[tuple[str, str, str | None]]:
    return [(e.request_id, e.reason_code, e.approver) for e in kit.events(ApprovalRejected)]


async def test_a_pending_call_withdrawn_by_its_requester_ends_as_a_signed_rejection(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    reply = await _withdraw(kit, "a")
    assert (reply.ok, reply.reason_code, reply.approval_id) == (True, "withdrawn", kit.approval_id("a"))
    [event] = kit.events(ApprovalRejected)
    assert (event.request_id, event.reason_code, event.approver) == (kit.ns + "a", "withdrawn", None)
    assert event.reason == "withdrawn by the requester demo-agent"
    assert verify_event(event, kit.key.public_key())
    assert (await kit.store.get(kit.approval_id("a"))).state is ApprovalState.REJECTED
    assert kit.approval_id("a") not in [p.approval_id for p in await kit.store.list_pending()]
    late = await kit.answer("alice", "a")
    assert (late.ok, late.reason_code) == (False, "not_pending")
    assert kit.events(ApprovalGranted) == []


async def test_a_second_withdrawal_answers_not_pending_and_publishes_nothing(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    assert (await _withdraw(kit, "a")).ok
    again = await _withdraw(kit, "a")
    assert (again.ok, again.reason_code, again.approval_id) == (False, "not_pending", None)
    assert len(kit.events(ApprovalRejected)) == 1


async def test_another_principal_cannot_withdraw_and_learns_nothing(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    other = await _withdraw(kit, "a", principal="other-agent")
    unknown = await _withdraw(kit, "never-submitted")
    assert (other.ok, other.reason_code) == (unknown.ok, unknown.reason_code) == (False, "not_pending")
    assert other.reason.replace(kit.ns + "a", "") == unknown.reason.replace(kit.ns + "never-submitted", "")
    assert (await kit.store.get(kit.approval_id("a"))).state is ApprovalState.PENDING
    assert kit.events(ApprovalRejected) == []


async def test_a_granted_call_is_not_interrupted(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    assert (await kit.answer("alice", "a")).reason_code == "granted"
    reply = await _withdraw(kit, "a")
    assert (reply.ok, reply.reason_code) == (False, "not_pending")
    assert (await kit.store.get(kit.approval_id("a"))).state is ApprovalState.GRANTED
    assert kit.events(ApprovalRejected) == []


async def test_an_expired_or_rejected_approval_is_not_withdrawn(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    await kit.approvals.on_decision(kit.decision("b", key="k2", content="y"))
    assert (await kit.answer("alice", "b", approve=False)).reason_code == "rejected"
    kit.clock.now += timedelta(seconds=61)
    replies = [await _withdraw(kit, rid) for rid in ("a", "b")]
    assert [(r.ok, r.reason_code) for r in replies] == [(False, "not_pending")] * 2
    assert _rejected(kit) == [(kit.ns + "b", "approval_rejected", "alice")]


async def test_withdrawing_a_request_that_joined_ends_the_approval_for_every_request(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    await kit.approvals.on_decision(kit.decision("b"))  # same key and arguments: joins a's approval
    reply = await _withdraw(kit, "b")
    assert (reply.ok, reply.approval_id) == (True, kit.approval_id("a"))
    assert sorted(_rejected(kit)) == [(kit.ns + "a", "withdrawn", None), (kit.ns + "b", "withdrawn", None)]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"not json", "malformed"),
        (b"{}", "malformed"),
        (b'{"request_id": "r1", "principal": "demo-agent"}', "malformed"),  # no identity from the body
        (b'{"request_id": "r1\\n"}', "malformed"),
        (b'{"request_id": "' + b"r" * 65 + b'"}', "malformed"),
        (b"[" * 500 + b"]" * 500, "malformed"),
        (b"[" * 5000 + b"]" * 5000, "oversized"),
        (b'{"request_id": "r1", "pad": "' + b"x" * MAX_WITHDRAW_BYTES + b'"}', "oversized"),
    ],
)
async def test_a_malformed_or_oversized_command_is_refused_and_changes_nothing(
    kit: Any, body: bytes, code: str
) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    reply = await withdraw_bytes(kit.approvals, "demo-agent", body)
    assert (reply.ok, reply.reason_code) == (False, code), reply.reason
    assert kit.events(ApprovalRejected) == []


async def test_a_lost_index_answers_index_lost(kit: Any, redis_client: aioredis.Redis) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    if isinstance(kit.store, InMemoryApprovalStore):
        kit.store.lose_everything()
    else:
        await redis_client.delete("tg:epoch:approvals")
    reply = await _withdraw(kit, "a")
    assert (reply.ok, reply.reason_code) == (False, "index_lost")
    assert kit.events(ApprovalRejected) == []
