"""Answers to an approval id before its approval is open, or to the id a joined request would have had.

An id derived from a request that will still open an approval is told ``approval_not_open``
(answer again) and reported nowhere; a joined request's own id answers the approval it
joined; only an id nothing will open is ``unknown_approval`` and reported. In memory and on Redis.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from effectgate.approvals.domain import ApprovalState, DecideCommand
from effectgate.approvals.early import EarlyAnswers
from effectgate.contracts.events import ApprovalGranted, ApprovalRejected, ApprovalVoted
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Verdict

PRINCIPAL = "demo-agent"


@pytest.fixture
def early(kit: Any) -> Any:
    """``kit`` whose approvals service tells approvals not open yet from unknown ones."""
    kit.approvals.early = EarlyAnswers(kit.bus, kit.approvals.directory, kit.policy.public_key())
    return kit


def _waits(kit: Any, rid: str) -> None:
    """Request ``ns + rid`` is in the stream, not decided yet."""
    kit.bus.undecided.append((PRINCIPAL, kit.ns + rid))


def _decided(kit: Any, rid: str, verdict: Verdict = Verdict.NEEDS_APPROVAL, *, signed: bool = True) -> None:
    """Request ``ns + rid`` has its decision stored (its approval not opened)."""
    decision = msgspec.structs.replace(kit.decision(rid), verdict=verdict, signature="")
    kit.bus.decisions[(PRINCIPAL, kit.ns + rid)] = sign_event(decision, kit.policy) if signed else decision


async def _answer(kit: Any, approver: str, approval_id: str, approve: bool = True, withdraw: bool = False) -> Any:
    command = DecideCommand(approval_id=approval_id, approve=approve, withdraw=withdraw)
    reply = await kit.approvals.answer(approver, command)
    await kit.approvals.reporter.flush()
    return reply


@pytest.mark.parametrize(
    "stage",
    ["undecided", "decided_not_opened", "decision_not_signed", "decided_with_quorum"],
)
async def test_an_approval_not_open_yet_is_answered_not_open_and_nothing_is_reported(early: Any, stage: str) -> None:
    _waits(early, "a")
    if stage != "undecided":
        _decided(early, "a", signed=stage != "decision_not_signed")
    reply = await _answer(early, "alice", early.approval_id("a"))
    assert (reply.ok, reply.reason_code, reply.approval_id) == (False, "approval_not_open", early.approval_id("a"))
    assert "answer again" in reply.reason
    assert early.reports == [] and early.published == []


async def test_once_it_opened_the_same_answer_counts(early: Any) -> None:
    _waits(early, "a")
    assert (await _answer(early, "alice", early.approval_id("a"))).reason_code == "approval_not_open"
    await early.approvals.on_decision(early.decision("a"))
    reply = await _answer(early, "alice", early.approval_id("a"))
    assert (reply.ok, reply.reason_code) == (True, "granted")
    assert [g.request_id for g in early.events(ApprovalGranted)] == [early.ns + "a"]
    assert early.reports == []


@pytest.mark.parametrize(
    "stage", ["decided_execute", "decided_deny", "ended", "not_in_stream", "not_an_approval_id", "another_principal"]
)
async def test_an_id_nothing_will_open_stays_unknown_and_is_reported(early: Any, stage: str) -> None:
    approval_id = early.approval_id("a")
    if stage in ("decided_execute", "decided_deny", "ended"):
        _waits(early, "a")
        verdict = {"decided_execute": Verdict.EXECUTE, "decided_deny": Verdict.DENY}.get(stage)
        if verdict is not None:
            _decided(early, "a", verdict)
        else:
            early.bus.receipts.add(early.ns + "a")
    elif stage == "not_an_approval_id":
        approval_id = "ap-" + early.ns
    elif stage == "another_principal":
        early.bus.undecided.append(("other-agent", early.ns + "a"))
    reply = await _answer(early, "alice", approval_id)
    assert (reply.ok, reply.reason_code) == (False, "unknown_approval")
    assert [(r.kind, r.reason_code) for r in early.reports] == [("approval_refused", "unknown_approval")]


@pytest.mark.parametrize(
    ("approver", "code"),
    [
        ("mallory", "unknown_approver"),
        (PRINCIPAL, "self_approval"),
        ("oscar", "self_approval"),
        ("carol", "not_entitled"),
    ],
)
async def test_a_voter_who_could_never_answer_it_is_refused_and_reported(early: Any, approver: str, code: str) -> None:
    _waits(early, "a")
    _decided(early, "a")
    reply = await _answer(early, approver, early.approval_id("a"))
    assert (reply.ok, reply.reason_code) == (False, code)
    assert [(r.kind, r.reason_code, r.actor) for r in early.reports] == [("approval_refused", code, approver)]


async def test_when_not_every_waiting_request_was_read_an_unknown_id_is_not_open_yet(early: Any) -> None:
    early.bus.more_waiting = True
    reply = await _answer(early, "alice", early.approval_id("zz"))
    assert (reply.ok, reply.reason_code) == (False, "approval_not_open")
    assert early.reports == []
    refused = await _answer(early, "mallory", early.approval_id("zz"))
    assert refused.reason_code == "unknown_approver"
    assert [r.reason_code for r in early.reports] == ["unknown_approver"]


@pytest.mark.parametrize("answer", ["approve", "reject", "withdraw"])
async def test_the_id_a_joined_request_would_have_had_answers_the_approval_it_joined(early: Any, answer: str) -> None:
    await early.approvals.on_decision(early.decision("a", quorum=2))
    await early.approvals.on_decision(early.decision("b", quorum=2))  # same key and arguments: joins a's
    own_b = early.approval_id("b")
    assert await early.store.get(own_b) is None
    if answer == "withdraw":
        await _answer(early, "bob", own_b)
    voter = "bob" if answer == "withdraw" else "alice"
    reply = await _answer(early, voter, own_b, answer == "approve", answer == "withdraw")
    assert reply.ok, reply
    assert reply.approval_id == early.approval_id("a")
    expected = {"approve": ("voted", ApprovalState.PENDING), "reject": ("rejected", ApprovalState.REJECTED)}
    code, state = expected.get(answer, ("withdrawn", ApprovalState.PENDING))
    assert (reply.reason_code, (await early.store.get(early.approval_id("a"))).state) == (code, state)
    if answer == "reject":
        assert sorted(r.request_id for r in early.events(ApprovalRejected)) == sorted([early.ns + "a", early.ns + "b"])
    else:
        assert all(v.approval_id == early.approval_id("a") for v in early.events(ApprovalVoted))
    assert early.reports == []


async def test_a_joined_request_is_granted_with_its_approval_by_votes_given_on_either_id(early: Any) -> None:
    await early.approvals.on_decision(early.decision("a", quorum=2))
    await early.approvals.on_decision(early.decision("b", quorum=2))
    await _answer(early, "alice", early.approval_id("b"))
    reply = await _answer(early, "bob", early.approval_id("a"))
    assert (reply.reason_code, reply.votes) == ("granted", ("alice", "bob"))
    granted = early.events(ApprovalGranted)
    assert sorted(g.request_id for g in granted) == sorted([early.ns + "a", early.ns + "b"])
    assert {g.approval_id for g in granted} == {early.approval_id("a")}


async def test_an_approval_that_opens_while_the_stream_is_read_is_answered(early: Any) -> None:
    decision = early.decision("a")
    reading = early.bus.waiting

    async def opened_meanwhile(limit: int) -> Any:
        await early.approvals.on_decision(decision)  # the copy was handled after the store was read
        return await reading(limit)  # ... and the request is behind both floors now: not waiting

    early.bus.waiting = opened_meanwhile
    reply = await _answer(early, "alice", early.approval_id("a"), approve=False)
    assert (reply.ok, reply.reason_code) == (True, "rejected")
    assert early.reports == []
