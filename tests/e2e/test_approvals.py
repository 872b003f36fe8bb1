"""What was approved is what runs, and only an entitled other person can approve (guarantees 4 and 6)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ApprovalGranted, BoundRequest, DecisionMade, encode, request_hash
from effectgate.contracts.integrity.signing import load_private_key, sign_event
from effectgate.shared.stores.stream import fetch_last, publish_event

pytestmark = pytest.mark.e2e

IN_MOVED_TO = 0x80


def _grant(pending: dict[str, Any], event_id: str, hash_: str, key: Ed25519PrivateKey) -> ApprovalGranted:
    grant = ApprovalGranted(
        event_id=event_id,
        occurred_at=datetime.now(UTC),
        request_id=pending["request_id"],
        principal=pending["principal"],
        approval_id=pending["approval_id"],
        request_hash=hash_,
        approver="alice",
        expires_at=datetime.fromisoformat(pending["expires_at"]),
    )
    return sign_event(grant, key)


async def _nothing_ran(gate: Any, watch: Any, pending: dict[str, Any], name: str) -> None:
    await gate.settle()
    await asyncio.sleep(1.0)
    receipt_subject = Subjects.receipt(pending["principal"], pending["request_id"])
    assert await gate.count(receipt_subject) == 0, "a forged approval produced a receipt"
    assert not (gate.paths.sandbox / name).exists(), "a forged approval ran the write"
    assert watch.count(name, IN_MOVED_TO) == 0
    assert await gate.is_pending(pending["request_id"]), "a forged approval consumed the pending approval"


async def test_grant_for_other_arguments_runs_nothing_and_real_grant_runs_the_original(
    gate: Any, watch: Any, new_id: Any
) -> None:
    agent, name = gate.agent(), new_id("bound-") + ".txt"
    watch.watch(gate.paths.sandbox)
    request_id = await gate.submit(agent, "write", {"path": name, "content": "original"})
    pending = await gate.pending(request_id)
    assert pending["request_hash"] == request_hash(BoundRequest(**pending["request"]))

    other = BoundRequest(**{**pending["request"], "arguments": {"path": name, "content": "tampered"}})
    real_key = load_private_key(gate.stack.keys_dir("approvals") / "approvals.key")
    forged = _grant(pending, new_id("forged-"), request_hash(other), real_key)
    await publish_event(gate.js, Subjects.approval("granted", agent, request_id), forged)
    await _nothing_ran(gate, watch, pending, name)

    reply = await gate.decide("alice", pending["approval_id"])
    assert reply["ok"], reply
    issued = await gate.receipt(agent, request_id)
    await gate.settle()

    assert (issued.outcome, issued.reason_code) == ("succeeded", "ok"), issued.reason
    assert issued.request_hash == pending["request_hash"]
    assert (gate.paths.sandbox / name).read_text() == "original"
    assert watch.count(name, IN_MOVED_TO) == 1, "the approved write did not run exactly once"
    assert await gate.count(Subjects.receipt(agent, request_id)) == 1


async def test_grant_signed_with_a_foreign_key_runs_nothing(gate: Any, watch: Any, new_id: Any) -> None:
    agent, name = gate.agent(), new_id("foreign-") + ".txt"
    watch.watch(gate.paths.sandbox)
    request_id = await gate.submit(agent, "write", {"path": name, "content": "original"})
    pending = await gate.pending(request_id)

    forged = _grant(pending, new_id("forged-"), pending["request_hash"], Ed25519PrivateKey.generate())
    await publish_event(gate.js, Subjects.approval("granted", agent, request_id), forged)
    await _nothing_ran(gate, watch, pending, name)

    assert (await gate.decide("alice", pending["approval_id"], approve=False))["ok"]
    issued = await gate.receipt(agent, request_id)
    assert (issued.outcome, issued.reason_code) == ("denied", "approval_rejected")
    assert not (gate.paths.sandbox / name).exists()


async def test_only_an_entitled_other_approver_can_approve(gate: Any, watch: Any, new_id: Any) -> None:
    name = new_id("self-") + ".txt"
    watch.watch(gate.paths.sandbox)
    request_id = await gate.submit("selfie", "write", {"path": name, "content": "mine"})
    approval_id = (await gate.pending(request_id))["approval_id"]

    refusals = {
        "selfie": "self_approval",
        "mallory": "unknown_approver",
        "carol": "not_entitled",
    }
    for approver, code in refusals.items():
        reply = await gate.decide(approver, approval_id)
        assert (reply["ok"], reply["reason_code"]) == (False, code), (approver, reply)
    await gate.settle()
    assert await gate.is_pending(request_id)
    assert not (gate.paths.sandbox / name).exists()
    assert await gate.count(Subjects.receipt("selfie", request_id)) == 0

    assert (await gate.decide("alice", approval_id))["ok"]
    issued = await gate.receipt("selfie", request_id)
    assert issued.outcome == "succeeded"
    assert (gate.paths.sandbox / name).read_text() == "mine"

    again = await gate.decide("bob", approval_id)
    assert (again["ok"], again["reason_code"]) == (False, "not_pending")
    await gate.settle()
    assert watch.count(name, IN_MOVED_TO) == 1


async def test_later_messages_on_the_decision_subject_do_not_change_what_the_grant_runs(
    gate: Any, watch: Any, new_id: Any
) -> None:
    agent, name = gate.agent(), new_id("second-") + ".txt"
    watch.watch(gate.paths.sandbox)
    request_id = await gate.submit(agent, "write", {"path": name, "content": "original"})
    pending = await gate.pending(request_id)
    subject = Subjects.decision(agent, request_id)
    first = await fetch_last(gate.js, subject)
    assert isinstance(first, DecisionMade) and first.request is not None

    other = msgspec.structs.replace(first.request, arguments={"path": name, "content": "tampered"})
    foreign = Ed25519PrivateKey.generate()
    tampered = msgspec.structs.replace(first, event_id=new_id("e-"), request=other, request_hash=request_hash(other))
    later = [
        b"not an event",
        encode(msgspec.structs.replace(tampered, signature="")),  # unsigned
        encode(sign_event(tampered, foreign)),  # signed, by a key that is not the policy's
        await _decision_bytes(gate, agent, await gate.submit(agent, "read", {"path": "x.txt"})),  # a real one,
        await _decision_bytes(gate, agent, await gate.submit(agent, "no_such_operation", {})),  # copied
    ]
    for data in later:
        await gate.publish_raw(subject, data, new_id("later-"))
    assert await gate.count(subject) == 1 + len(later)

    assert (await gate.decide("alice", pending["approval_id"]))["ok"]
    issued = await gate.receipt(agent, request_id)
    await gate.settle()
    assert (issued.outcome, issued.request_hash) == ("succeeded", pending["request_hash"]), issued.reason
    assert (gate.paths.sandbox / name).read_text() == "original"
    assert watch.count(name, IN_MOVED_TO) == 1
    assert await gate.count(Subjects.receipt(agent, request_id)) == 1


async def _decision_bytes(gate: Any, principal: str, request_id: str) -> bytes:
    """The stored decision of another request, as its bytes (what a copier would publish)."""
    await gate.receipt(principal, request_id)
    stored = await gate.js.get_last_msg(catalog.STREAM, Subjects.decision(principal, request_id))
    return bytes(stored.data)


async def test_the_approvals_service_is_delivered_only_the_decisions_that_need_approval(gate: Any, new_id: Any) -> None:
    agent, name = gate.agent(), new_id("asked-") + ".txt"
    await gate.settle()
    before = (await gate.js.consumer_info(catalog.STREAM, catalog.APPROVALS_CONSUMER.durable)).delivered.consumer_seq
    read = await gate.call(agent, "read", {"path": name})  # decided: execute (no such file: refused by the tool)
    denied = await gate.call(agent, "delete", {"path": name})  # decided: deny (no such operation)
    request_id = await gate.submit(agent, "write", {"path": name, "content": "asked"})
    pending = await gate.pending(request_id)
    await gate.settle()
    after = (await gate.js.consumer_info(catalog.STREAM, catalog.APPROVALS_CONSUMER.durable)).delivered.consumer_seq
    verdicts = [
        (await fetch_last(gate.js, Subjects.decision(agent, rid))).verdict
        for rid in (read.request_id, denied.request_id)
    ]
    assert verdicts == ["execute", "deny"], (read.reason, denied.reason)
    assert after - before == 1, "the approvals service was delivered decisions it does not act on"
    copy = await fetch_last(gate.js, Subjects.needs_approval(agent, request_id))
    assert isinstance(copy, DecisionMade) and copy == await fetch_last(gate.js, Subjects.decision(agent, request_id))
    assert pending["request_id"] == request_id
