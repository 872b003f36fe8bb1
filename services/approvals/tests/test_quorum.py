"""Votes, quorum, withdrawals, replays and duplicate requests; in memory and on a real Redis."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
import redis.asyncio as aioredis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.approvals.domain import ApprovalState
from effectgate.approvals.handlers import answer_bytes
from effectgate.approvals.memory import InMemoryApprovalStore
from effectgate.approvals.ports import ApprovalStore, ReceiptSeen, VoteStatus
from effectgate.approvals.rebuild import rebuild_approvals
from effectgate.contracts.events import ApprovalGranted, ApprovalRejected, ApprovalRequested, ApprovalVoted
from effectgate.contracts.integrity.signing import sign_event, verify_event


def _kinds(kit: Any) -> list[str]:
    return [subject.split(".")[2] for subject, _ in kit.published]


async def test_a_quorum_of_two_is_granted_once_by_two_distinct_approvers(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a", quorum=2))
    [requested] = kit.events(ApprovalRequested)
    assert (requested.approvals_required, requested.idempotency_key) == (2, kit.ns + "k1")
    assert requested.approvers == ("alice", "bob", "dave")  # not demo-agent itself, not oscar who operates it

    first = await kit.answer("alice", "a")
    assert (first.ok, first.reason_code, first.votes, first.approvals_required) == (True, "voted", ("alice",), 2)
    assert first.reason.startswith("vote 1 of 2 recorded")
    [voted] = kit.events(ApprovalVoted)
    assert (voted.approver, voted.votes, voted.withdrawn, voted.approvals_required) == ("alice", ("alice",), False, 2)
    assert verify_event(voted, kit.key.public_key()) and kit.events(ApprovalGranted) == []

    second = await kit.answer("bob", "a")
    assert (second.ok, second.reason_code, second.state, second.votes) == (True, "granted", "granted", ("alice", "bob"))
    [granted] = kit.events(ApprovalGranted)
    assert (granted.approver, granted.approvers) == ("bob", ("alice", "bob"))
    assert verify_event(granted, kit.key.public_key())
    assert _kinds(kit) == ["requested", "voted", "granted"]
    assert [q.approver for q in kit.queries] == ["alice", "bob"], "each vote is re-checked with the policy"
    assert kit.reports == []


async def test_the_same_approver_twice_does_not_meet_the_quorum(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a", quorum=2))
    assert (await kit.answer("alice", "a")).reason_code == "voted"
    again = await kit.answer("alice", "a")
    assert (again.ok, again.reason_code, again.votes) == (True, "already_voted", ("alice",))
    assert len(kit.events(ApprovalVoted)) == 1 and kit.events(ApprovalGranted) == [] and kit.reports == []
    assert (await kit.store.get(kit.approval_id("a"))).state is ApprovalState.PENDING


async def test_one_entitled_rejection_after_a_vote_rejects(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a", quorum=2))
    await kit.answer("alice", "a")
    rejected = await kit.answer("bob", "a", approve=False)
    assert (rejected.ok, rejected.reason_code, rejected.state) == (True, "rejected", "rejected")
    [event] = kit.events(ApprovalRejected)
    assert (event.approver, event.reason_code) == ("bob", "approval_rejected")
    late = await kit.answer("dave", "a")
    assert (late.ok, late.reason_code) == (False, "not_pending")
    assert [(r.actor, r.reason_code) for r in kit.reports] == [("dave", "not_pending")]
    assert kit.events(ApprovalGranted) == []


async def test_a_repeated_finished_answer_is_ok_and_not_reported_but_another_is(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    assert (await kit.answer("bob", "a", approve=False)).ok
    again = await kit.answer("bob", "a", approve=False)
    assert (again.ok, again.reason_code, again.state) == (True, "rejected", "rejected")
    flipped = await kit.answer("bob", "a")  # not a repeat: bob now approves what he rejected
    other = await kit.answer("alice", "a", approve=False)
    assert [(r.ok, r.reason_code) for r in (flipped, other)] == [(False, "not_pending"), (False, "not_pending")]
    assert [(r.actor, r.reason_code) for r in kit.reports] == [("bob", "not_pending"), ("alice", "not_pending")]
    assert len(kit.events(ApprovalRejected)) == 1


async def test_a_withdrawn_vote_no_longer_counts(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a", quorum=2))
    await kit.answer("alice", "a")
    withdrawn = await kit.answer("alice", "a", approve=False, withdraw=True)
    assert (withdrawn.ok, withdrawn.reason_code, withdrawn.votes, withdrawn.state) == (True, "withdrawn", (), "pending")
    assert [(v.approver, v.withdrawn, v.votes) for v in kit.events(ApprovalVoted)] == [
        ("alice", False, ("alice",)),
        ("alice", True, ()),
    ]
    nothing = await kit.answer("alice", "a", approve=False, withdraw=True)
    assert (nothing.ok, nothing.reason_code) == (True, "not_voted") and len(kit.events(ApprovalVoted)) == 2
    assert (await kit.answer("bob", "a")).reason_code == "voted", "bob's vote is the only one now"
    assert (await kit.answer("alice", "a")).reason_code == "granted"
    assert [g.approvers for g in kit.events(ApprovalGranted)] == [("bob", "alice")]
    late = await kit.answer("bob", "a", approve=False, withdraw=True)
    assert (late.ok, late.reason_code) == (False, "not_pending") and kit.reports[-1].reason_code == "not_pending"


async def test_a_withdraw_that_also_approves_is_refused_as_malformed(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    body = f'{{"approval_id": "{kit.approval_id("a")}", "approve": true, "withdraw": true}}'.encode()
    reply = await answer_bytes(kit.approvals, "alice", body)
    assert (reply.ok, reply.reason_code) == (False, "malformed") and "withdraw" in reply.reason
    assert (await kit.store.get(kit.approval_id("a"))).votes == ()


async def test_racing_votes_grant_the_quorum_exactly_once(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a", quorum=2))
    replies = await asyncio.gather(*(kit.answer(name, "a") for name in ("alice", "bob", "dave")))
    codes = sorted(r.reason_code for r in replies)
    assert codes in (["granted", "not_pending", "voted"], ["granted", "voted", "voted"]), codes
    [granted] = kit.events(ApprovalGranted)
    assert len(granted.approvers) == 2


async def test_the_same_key_and_arguments_while_pending_join_one_approval(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    await kit.approvals.on_decision(kit.decision("b"))
    await kit.approvals.on_decision(kit.decision("b"))  # redelivered: joins once
    [listed] = [p for p in await kit.approvals.list_pending() if p.request_id.startswith(kit.ns)]
    assert (listed.approval_id, listed.joined) == (kit.approval_id("a"), (kit.ns + "b",))
    requested = kit.events(ApprovalRequested)
    assert {(e.request_id, e.approval_id) for e in requested} == {
        (kit.ns + "a", kit.approval_id("a")),
        (kit.ns + "b", kit.approval_id("a")),
    }
    assert (await kit.answer("alice", "a")).reason_code == "granted"
    grants = kit.events(ApprovalGranted)
    assert sorted(g.request_id for g in grants) == [kit.ns + "a", kit.ns + "b"]
    assert {g.approval_id for g in grants} == {kit.approval_id("a")}
    assert all(verify_event(g, kit.key.public_key()) for g in grants)


async def test_a_joined_approval_expires_for_every_request(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    await kit.approvals.on_decision(kit.decision("b"))
    kit.clock.now += timedelta(seconds=61)
    await kit.approvals.on_decision(kit.decision("c"))  # the pending one expired: a new approval
    assert await kit.store.get(kit.approval_id("c")) is not None
    await kit.approvals.expire_due()
    expired = sorted(e.request_id for e in kit.events(ApprovalRejected) if e.reason_code == "approval_expired")
    assert expired == [kit.ns + "a", kit.ns + "b"]
    assert (await kit.store.get(kit.approval_id("c"))).state is ApprovalState.PENDING


async def test_the_same_arguments_under_a_new_key_open_a_related_approval(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a", key="k1"))
    await kit.approvals.on_decision(kit.decision("b", key="k2"))
    await kit.approvals.on_decision(kit.decision("c", key="k1", content="other"))  # same key, other arguments
    requested = {e.request_id: e for e in kit.events(ApprovalRequested)}
    assert requested[kit.ns + "b"].approval_id == kit.approval_id("b")
    [related] = requested[kit.ns + "b"].related
    assert (related.approval_id, related.request_id, related.state, related.same_key) == (
        kit.approval_id("a"),
        kit.ns + "a",
        "pending",
        False,
    )
    assert requested[kit.ns + "c"].related == ()

    await kit.answer("alice", "a")
    kit.bus.receipts.add(kit.ns + "a")
    kit.bus.receipt_seen[kit.ns + "a"] = ReceiptSeen("receipt-1", "succeeded")
    listed = {p.request_id: p for p in await kit.approvals.list_pending()}
    [seen] = listed[kit.ns + "b"].related
    assert (seen.state, seen.receipt_id, seen.outcome) == ("granted", "receipt-1", "succeeded")


async def test_the_same_key_after_a_rejection_opens_a_new_approval_naming_the_old(kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    await kit.answer("alice", "a", approve=False)
    await kit.approvals.on_decision(kit.decision("b"))
    [requested] = [e for e in kit.events(ApprovalRequested) if e.request_id == kit.ns + "b"]
    assert requested.approval_id == kit.approval_id("b")
    assert [(r.approval_id, r.state, r.same_key) for r in requested.related] == [
        (kit.approval_id("a"), "rejected", True)
    ]


async def _lose_everything(store: ApprovalStore, redis_client: aioredis.Redis) -> None:
    if isinstance(store, InMemoryApprovalStore):
        store.lose_everything()
        return
    keys = [key async for key in redis_client.scan_iter("tg:approval*")]
    await redis_client.delete(*keys, "tg:epoch:approvals", "tg:rebuild:approvals")


async def test_a_rebuild_restores_votes_and_joined_requests(kit: Any, redis_client: aioredis.Redis) -> None:
    await kit.approvals.on_decision(kit.decision("a", quorum=3))
    await kit.approvals.on_decision(kit.decision("b", quorum=3))
    await kit.answer("alice", "a")
    await kit.answer("dave", "a")
    await kit.answer("dave", "a", approve=False, withdraw=True)
    [vote] = kit.events(ApprovalVoted)[:1]
    forged = sign_event(
        vote.__class__(**{**_fields(vote), "votes": ("alice", "mallory")}), Ed25519PrivateKey.generate()
    )
    kit.bus.requests, kit.bus.votes = kit.events(ApprovalRequested), [*kit.events(ApprovalVoted), forged]
    await _lose_everything(kit.store, redis_client)

    assert await rebuild_approvals(kit.store, kit.bus, "me", kit.key.public_key())
    restored = await kit.store.get(kit.approval_id("a"))
    assert (restored.votes, restored.joined, restored.approvals_required) == (("alice",), (kit.ns + "b",), 3)
    assert (await kit.answer("alice", "a")).reason_code == "already_voted"
    assert (await kit.answer("bob", "a")).reason_code == "voted"
    assert (await kit.answer("dave", "a")).reason_code == "granted"
    assert sorted(g.request_id for g in kit.events(ApprovalGranted)) == [kit.ns + "a", kit.ns + "b"]


def _fields(event: Any) -> dict[str, Any]:
    return {name: getattr(event, name) for name in event.__struct_fields__ if name != "signature"}


async def test_a_vote_retried_with_its_token_answers_as_it_did(store: ApprovalStore, kit: Any) -> None:
    await kit.approvals.on_decision(kit.decision("a", quorum=2))
    approval_id = kit.approval_id("a")
    first = await store.vote(approval_id, "alice", 2, "t1")
    assert (first.status, await store.vote(approval_id, "alice", 2, "t1")) == (VoteStatus.VOTED, first)
    assert (await store.vote(approval_id, "alice", 2, "t9")).status is VoteStatus.ALREADY_VOTED
    done = await store.vote(approval_id, "bob", 2, "t2")
    assert (done.status, done.state, done.votes) == (VoteStatus.GRANTED, ApprovalState.GRANTED, ("alice", "bob"))
    assert await store.vote(approval_id, "bob", 2, "t2") == done
    late = await store.vote(approval_id, "dave", 2, "t3")
    assert (late.status, late.state) == (VoteStatus.NOT_PENDING, ApprovalState.GRANTED)
    assert (await store.get(approval_id)).answered_by == "bob"  # type: ignore[union-attr]


@pytest.mark.parametrize("quorum", [1, 3])
async def test_the_reply_and_the_grant_follow_the_quorum(kit: Any, quorum: int) -> None:
    await kit.approvals.on_decision(kit.decision("a", quorum=quorum))
    codes = [(await kit.answer(name, "a")).reason_code for name in ("alice", "bob", "dave")]
    assert codes == (["granted", "not_pending", "not_pending"] if quorum == 1 else ["voted", "voted", "granted"])
    assert len(kit.events(ApprovalGranted)) == 1
