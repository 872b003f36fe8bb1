"""A receipt names the approval its request waited on (``approval_id``), whatever path ended it.

The id is the grant's or the rejection's (a request that joined another approval is answered
by that approval's id, which the agent cannot derive), or the opened approval's when the
backstop ends one never answered; a call that needed no approval names none.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from effectgate.contracts.events import ApprovalGranted, ApprovalRejected, ApprovalRequested
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Outcome, Verdict
from effectgate.executor.ports import ApprovalTrail
from effectgate.shared.consumer.acks import Settle

WRITE = {"path": "named.txt", "content": "x"}


def _grant(harness: Any, decision: Any, approval_id: str, **fields: Any) -> ApprovalGranted:
    grant = msgspec.structs.replace(harness.grant(decision), approval_id=approval_id, signature="", **fields)
    return sign_event(grant, harness.approvals_key)


def _rejection(harness: Any, decision: Any, approval_id: str, code: str) -> ApprovalRejected:
    rejected = ApprovalRejected(
        event_id=f"x-{decision.request_id}",
        occurred_at=harness.clock(),
        request_id=decision.request_id,
        principal=decision.principal,
        approval_id=approval_id,
        approver="alice",
        reason_code=code,
        reason=code,
    )
    return sign_event(rejected, harness.approvals_key)


@pytest.mark.parametrize(
    ("how", "outcome", "code"),
    [
        ("granted", Outcome.SUCCEEDED, "ok"),
        ("grant_expired", Outcome.DENIED, "approval_expired"),
        ("rejected", Outcome.DENIED, "approval_rejected"),
        ("expired", Outcome.DENIED, "approval_expired"),
        ("withdrawn", Outcome.DENIED, "withdrawn"),
        ("no_longer_allowed", Outcome.DENIED, "forbidden"),
    ],
)
async def test_each_ending_of_an_approved_or_refused_call_names_its_approval(
    harness: Any, how: str, outcome: Outcome, code: str
) -> None:
    decision = harness.decision("write", WRITE, verdict=Verdict.NEEDS_APPROVAL)
    if how == "no_longer_allowed":
        harness.bus.answer = harness.answer_with(False, "forbidden")
    if how in ("granted", "grant_expired", "no_longer_allowed"):
        ttl = {"expires_at": harness.clock() - timedelta(seconds=1)} if how == "grant_expired" else {}
        settled = await harness.executor.on_granted(_grant(harness, decision, "ap-0123456789ab", **ttl))
    else:
        reason = {"rejected": "approval_rejected", "expired": "approval_expired"}.get(how, how)
        settled = await harness.executor.on_rejected(_rejection(harness, decision, "ap-0123456789ab", reason))
    assert settled is Settle.ACK
    assert harness.receipt("r1") == (outcome, code)
    assert harness.bus.receipts["r1"].approval_id == "ap-0123456789ab"


async def test_a_joined_request_names_the_approval_it_joined_on_its_replayed_receipt(harness: Any) -> None:
    first, second = (harness.decision("write", WRITE, rid=rid, verdict=Verdict.NEEDS_APPROVAL) for rid in ("r1", "r2"))
    assert await harness.executor.on_granted(_grant(harness, first, "ap-aaaaaaaaaaaa")) is Settle.ACK
    assert await harness.executor.on_granted(_grant(harness, second, "ap-aaaaaaaaaaaa")) is Settle.ACK
    assert harness.receipt("r2") == (Outcome.REPLAYED, "ok")
    assert {r.approval_id for r in harness.receipts} == {"ap-aaaaaaaaaaaa"}


async def test_a_redelivered_grant_republishes_the_stored_receipt_as_it_was(harness: Any, sandbox: Path) -> None:
    decision = harness.decision("write", WRITE, verdict=Verdict.NEEDS_APPROVAL)
    grant = _grant(harness, decision, "ap-bbbbbbbbbbbb")
    await harness.executor.on_granted(grant)
    stored = harness.bus.receipts.pop("r1")  # its publication was lost: the redelivery republishes it
    assert await harness.executor.on_granted(grant) is Settle.ACK
    assert harness.bus.receipts["r1"] == stored and stored.approval_id == "ap-bbbbbbbbbbbb"
    assert (sandbox / "named.txt").read_text() == "x"


@pytest.mark.parametrize("signed", [True, False])
async def test_the_backstop_names_the_approval_opened_and_never_answered(harness: Any, signed: bool) -> None:
    decision = harness.decision("write", WRITE, verdict=Verdict.NEEDS_APPROVAL, age_s=1000)
    requested = ApprovalRequested(
        event_id="q",
        occurred_at=decision.occurred_at,
        request_id="r1",
        principal="demo-agent",
        approval_id="ap-cccccccccccc",
        request_hash=decision.request_hash or "",
        approver_role="operator",
        expires_at=harness.clock() - timedelta(seconds=30),
        request=decision.request,
    )
    opened = sign_event(requested, harness.approvals_key) if signed else requested
    harness.bus.trails["r1"] = ApprovalTrail(requested=opened)
    assert await harness.backstop.check("demo-agent", "r1", harness.clock() - timedelta(seconds=1000)) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.DENIED, "approval_not_answered")
    assert harness.bus.receipts["r1"].approval_id == ("ap-cccccccccccc" if signed else None)


async def test_the_backstop_names_the_grant_of_a_granted_call_that_never_ran(harness: Any) -> None:
    decision = harness.decision("write", WRITE, verdict=Verdict.NEEDS_APPROVAL, age_s=3600)
    grant = _grant(harness, decision, "ap-dddddddddddd", occurred_at=harness.clock() - timedelta(seconds=3600))
    harness.bus.trails["r1"] = ApprovalTrail(granted=(grant,))
    assert await harness.backstop.check("demo-agent", "r1", harness.clock() - timedelta(seconds=3600)) is Settle.ACK
    assert (harness.receipt("r1"), harness.bus.receipts["r1"].approval_id) == (
        (Outcome.FAILED, "not_executed"),
        "ap-dddddddddddd",
    )


async def test_a_call_that_needed_no_approval_names_none_even_while_another_is_granted(harness: Any) -> None:
    approved = harness.decision("write", WRITE, verdict=Verdict.NEEDS_APPROVAL)
    direct = harness.decision("read", {"path": "a.txt"}, rid="r2", key="k2")
    await asyncio.gather(
        harness.executor.on_granted(_grant(harness, approved, "ap-eeeeeeeeeeee")),
        harness.executor.on_decision(direct),
    )
    assert harness.bus.receipts["r1"].approval_id == "ap-eeeeeeeeeeee"
    assert harness.bus.receipts["r2"].approval_id is None


def test_only_the_receipt_of_the_request_being_handled_is_stamped(harness: Any) -> None:
    from effectgate.executor.domain import receipt
    from effectgate.executor.receipts.waiting_on import stamped, waiting_on

    own, other = (harness.decision("read", {"path": "a.txt"}, rid=rid) for rid in ("r1", "r2"))
    with waiting_on("demo-agent", "r1", "ap-ffffffffffff"):
        mine, theirs = (stamped(receipt(d, harness.clock(), Outcome.SUCCEEDED, "ok", "ok")) for d in (own, other))
    after = stamped(receipt(own, harness.clock(), Outcome.SUCCEEDED, "ok", "ok"))
    assert (mine.approval_id, theirs.approval_id, after.approval_id) == ("ap-ffffffffffff", None, None)
