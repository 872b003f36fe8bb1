"""The audit on intake: forgeries on signed subjects are reported, security events raise alarms and are listed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.audit.adapters.sqlite import SqliteAuditStore
from effectgate.audit.intake import entry_of
from effectgate.audit.sentinel import SIGNED, forgery
from effectgate.audit.service import Audit
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import (
    ApprovalGranted,
    ApprovalRejected,
    ApprovalRequested,
    ApprovalVoted,
    BoundRequest,
    DecisionMade,
    PolicyPublished,
    SecurityEvent,
    encode,
)
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.rpc.audit import Alarm
from effectgate.contracts.security import SecurityKind, digest
from effectgate.contracts.vocabulary import Verdict
from effectgate.shared.runtime.reporting import SecurityReporter

POLICY, APPROVALS = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
KEYS = {"policy": POLICY.public_key(), "approvals": APPROVALS.public_key()}
NOW = datetime.now(UTC)


def _decision(rid: str = "r1") -> DecisionMade:
    return DecisionMade(
        event_id=f"d-{rid}",
        occurred_at=NOW,
        request_id=rid,
        principal="a1",
        verdict=Verdict.DENY,
        reason_code="no_permit",
        reason="r",
    )


def _granted(rid: str = "r1") -> ApprovalGranted:
    return ApprovalGranted(
        event_id=f"g-{rid}",
        occurred_at=NOW,
        request_id=rid,
        principal="a1",
        approval_id="ap-1",
        request_hash="sha256:h",
        approver="alice",
        expires_at=NOW,
    )


def _rejected(rid: str = "r1") -> ApprovalRejected:
    return ApprovalRejected(
        event_id=f"j-{rid}",
        occurred_at=NOW,
        request_id=rid,
        principal="a1",
        approval_id="ap-1",
        reason_code="approval_rejected",
        reason="no",
    )


def _voted(rid: str = "r1") -> ApprovalVoted:
    return ApprovalVoted(
        event_id=f"v-{rid}",
        occurred_at=NOW,
        request_id=rid,
        principal="a1",
        approval_id="ap-1",
        request_hash="sha256:h",
        approver="alice",
        votes=("alice",),
        approvals_required=2,
    )


def _requested(rid: str = "r1") -> ApprovalRequested:
    return ApprovalRequested(
        event_id=f"q-{rid}",
        occurred_at=NOW,
        request_id=rid,
        principal="a1",
        approval_id="ap-1",
        request_hash="sha256:h",
        approver_role="operator",
        expires_at=NOW,
        request=BoundRequest(
            principal="a1", tool="t", version="1.0.0", descriptor_digest="sha256:d", operation="w", arguments={}
        ),
    )


def _policy_published() -> PolicyPublished:
    return PolicyPublished(event_id="p1", occurred_at=NOW, version="sha256:" + "a" * 64, source="cli", revision=3)


DECISION, GRANTED, REJECTED, VOTED = (
    Subjects.decision("a1", "r1"),
    Subjects.approval("granted", "a1", "r1"),
    Subjects.approval("rejected", "a1", "r1"),
    Subjects.approval("voted", "a1", "r1"),
)
REQUESTED = Subjects.approval("requested", "a1", "r1")
ASKED = Subjects.needs_approval("a1", "r1")
FORGERIES: dict[str, tuple[str, bytes, SecurityKind, str]] = {
    # name: subject, body, reported kind, what the detail says
    "decision-foreign": (
        DECISION,
        encode(sign_event(_decision(), Ed25519PrivateKey.generate())),
        SecurityKind.DECISION_FORGED,
        "not signed by the policy key",
    ),
    "decision-unsigned": (DECISION, encode(_decision()), SecurityKind.DECISION_FORGED, "not signed by the policy key"),
    "decision-by-approvals": (
        DECISION,
        encode(sign_event(_decision(), APPROVALS)),
        SecurityKind.DECISION_FORGED,
        "not signed by the policy key",
    ),
    "decision-copied": (
        DECISION,
        encode(sign_event(_decision("r2"), POLICY)),
        SecurityKind.DECISION_FORGED,
        "about a1/r2",
    ),
    "decision-junk": (DECISION, b"not json", SecurityKind.DECISION_FORGED, "not a DecisionMade"),
    "grant-by-policy": (
        GRANTED,
        encode(sign_event(_granted(), POLICY)),
        SecurityKind.APPROVAL_FORGED,
        "not signed by the approvals key",
    ),
    "grant-unsigned": (GRANTED, encode(_granted()), SecurityKind.APPROVAL_FORGED, "not signed by the approvals key"),
    "grant-is-a-decision": (
        GRANTED,
        encode(sign_event(_decision(), POLICY)),
        SecurityKind.APPROVAL_FORGED,
        "not a ApprovalGranted",
    ),
    "rejection-foreign": (
        REJECTED,
        encode(sign_event(_rejected(), Ed25519PrivateKey.generate())),
        SecurityKind.APPROVAL_FORGED,
        "not signed by the approvals key",
    ),
    "rejection-copied": (
        REJECTED,
        encode(sign_event(_rejected("r3"), APPROVALS)),
        SecurityKind.APPROVAL_FORGED,
        "about a1/r3",
    ),
    "vote-foreign": (
        VOTED,
        encode(sign_event(_voted(), Ed25519PrivateKey.generate())),
        SecurityKind.APPROVAL_FORGED,
        "not signed by the approvals key",
    ),
    "vote-unsigned": (VOTED, encode(_voted()), SecurityKind.APPROVAL_FORGED, "not signed by the approvals key"),
    "vote-copied": (VOTED, encode(sign_event(_voted("r4"), APPROVALS)), SecurityKind.APPROVAL_FORGED, "about a1/r4"),
    "request-card-unsigned": (
        REQUESTED,
        encode(_requested()),
        SecurityKind.APPROVAL_FORGED,
        "not signed by the approvals key",
    ),
    "request-card-by-policy": (
        REQUESTED,
        encode(sign_event(_requested(), POLICY)),
        SecurityKind.APPROVAL_FORGED,
        "not signed by the approvals key",
    ),
    "vote-is-a-grant": (
        VOTED,
        encode(sign_event(_granted(), APPROVALS)),
        SecurityKind.APPROVAL_FORGED,
        "not a ApprovalVoted",
    ),
    "policy-published-unsigned": (
        Subjects.POLICY_PUBLISHED,
        encode(_policy_published()),
        SecurityKind.POLICY_FORGED,
        "not signed by the policy key",
    ),
    "policy-published-by-approvals": (
        Subjects.POLICY_PUBLISHED,
        encode(sign_event(_policy_published(), APPROVALS)),
        SecurityKind.POLICY_FORGED,
        "not signed by the policy key",
    ),
    "policy-published-junk": (Subjects.POLICY_PUBLISHED, b"{}", SecurityKind.POLICY_FORGED, "not a PolicyPublished"),
    "needs-approval-unsigned": (
        ASKED,
        encode(_decision()),
        SecurityKind.DECISION_FORGED,
        "not signed by the policy key",
    ),
    "needs-approval-copied": (
        ASKED,
        encode(sign_event(_decision("r5"), POLICY)),
        SecurityKind.DECISION_FORGED,
        "about a1/r5",
    ),
}
GENUINE = {
    "decision": (DECISION, encode(sign_event(_decision(), POLICY))),
    "needs-approval": (ASKED, encode(sign_event(_decision(), POLICY))),
    "grant": (GRANTED, encode(sign_event(_granted(), APPROVALS))),
    "rejection": (REJECTED, encode(sign_event(_rejected(), APPROVALS))),
    "vote": (VOTED, encode(sign_event(_voted(), APPROVALS))),
    "approval-requested": (REQUESTED, encode(sign_event(_requested(), APPROVALS))),
    "policy-published": (Subjects.POLICY_PUBLISHED, encode(sign_event(_policy_published(), POLICY))),
    "request": (Subjects.request("a1"), b"anything at all"),
    "receipt": (Subjects.receipt("a1", "r1"), b"{}"),
}


@pytest.mark.parametrize("name", list(FORGERIES))
def test_every_kind_of_forgery_on_a_signed_subject_is_found(name: str) -> None:
    subject, data, kind, detail = FORGERIES[name]
    found = forgery(subject, data, KEYS)
    assert found is not None and found.rule.kind is kind and detail in found.detail


@pytest.mark.parametrize("name", list(GENUINE))
def test_genuine_and_unsigned_subjects_are_not_forgeries(name: str) -> None:
    assert forgery(*GENUINE[name], KEYS) is None


def test_a_subject_whose_key_is_absent_is_not_checked() -> None:
    subject, data, _, _ = FORGERIES["decision-unsigned"]
    assert forgery(subject, data, {"approvals": APPROVALS.public_key()}) is None
    assert forgery(*FORGERIES["grant-unsigned"][:2], {"approvals": APPROVALS.public_key()}) is not None


def test_the_table_names_one_key_and_kind_per_signed_subject() -> None:
    assert [(rule.pattern, rule.key, rule.kind.value) for rule in SIGNED] == [
        ("tg.decision.*.*", "policy", "decision_forged"),
        ("tg.needs_approval.*.*", "policy", "decision_forged"),
        ("tg.approval.requested.*.*", "approvals", "approval_forged"),
        ("tg.approval.granted.*.*", "approvals", "approval_forged"),
        ("tg.approval.rejected.*.*", "approvals", "approval_forged"),
        ("tg.approval.voted.*.*", "approvals", "approval_forged"),
        ("tg.receipt.*.*", "receipts", "receipt_forged"),
        ("tg.resolution.*.*", "receipts", "receipt_forged"),
        ("tg.policy.published", "policy", "policy_forged"),
    ]


@pytest.fixture
async def audit(tmp_path: Path) -> AsyncIterator[tuple[Audit, list[Any], list[tuple[str, bytes]]]]:
    reported: list[Any] = []
    announced: list[tuple[str, bytes]] = []

    async def publish(subject: str, event: Any) -> None:
        reported.append((subject, event))

    async def announce(subject: str, body: bytes) -> None:
        announced.append((subject, body))

    async def last_seq() -> int | None:
        return None

    reporter = SecurityReporter("audit")
    reporter.attach_publish(publish)
    store = SqliteAuditStore(tmp_path / "audit.db")
    yield Audit(store, last_seq, keys=KEYS, reporter=reporter, announce=announce), reported, announced
    await store.close()


async def _intake(audit: Audit, seq: int, subject: str, data: bytes) -> None:
    """What the audit consumer does with one delivered message."""
    record = await audit.store.append(entry_of(subject, data, None, seq, NOW.isoformat()))
    if record is not None:
        await audit.inspect(record, data)


def _security(kind: SecurityKind, rid: str, service: str = "approvals") -> tuple[str, bytes]:
    event = SecurityEvent(
        event_id=f"s-{rid}", occurred_at=NOW, kind=kind, service=service, request_id=rid, detail="seen"
    )
    return Subjects.security(service, kind.value), encode(event)


async def test_a_forgery_is_recorded_and_reported_once(audit: Any) -> None:
    service, reported, _ = audit
    subject, data, kind, _ = FORGERIES["decision-foreign"]
    await _intake(service, 1, subject, data)
    await _intake(service, 1, subject, data)  # a redelivery: recorded once, reported once
    await service.reporter.flush()
    [(published_on, event)] = reported
    assert published_on == f"tg.security.audit.{kind.value}"
    assert (event.principal, event.request_id, event.subject) == ("a1", "r1", subject)
    assert event.payload_sha256 == digest(data) and "audit sequence 1" in event.detail
    assert (await service.store.count()) == 1


async def test_each_recorded_security_event_raises_one_alarm_and_is_listed(audit: Any) -> None:
    service, reported, announced = audit
    kinds = [SecurityKind.APPROVAL_REFUSED, SecurityKind.DECISION_FORGED, SecurityKind.PERMISSION_VIOLATION]
    for seq, kind in enumerate(kinds, start=1):
        await _intake(service, seq, *_security(kind, f"r{seq}"))
    await _intake(service, 4, Subjects.request("a1"), b'{"type": "security.event", "kind": "approval_refused"}')
    await _intake(service, 5, *_security(kinds[0], "r1"))  # another event of the same kind: its own alarm
    await _intake(service, 3, *_security(kinds[2], "r3"))  # a redelivery: no second alarm
    assert [subject for subject, _ in announced] == [f"tg.alarm.{k.value}" for k in (*kinds, kinds[0])]
    first = msgspec.json.decode(announced[0][1], type=Alarm)
    assert (first.sequence, first.stream_seq, first.service, first.event.request_id) == (1, 1, "approvals", "r1")

    listed = await service.alarms(3)
    assert listed.ok and [a.sequence for a in listed.alarms] == [2, 3, 5], "the most recent, oldest first"
    assert [a.sequence for a in (await service.alarms(50)).alarms] == [1, 2, 3, 5], "an agent's body is no alarm"
    assert reported == []


@pytest.mark.parametrize("limit", [0, -1, 501])
async def test_a_limit_out_of_range_is_refused_naming_the_range(audit: Any, limit: int) -> None:
    reply = await audit[0].alarms(limit)
    assert not reply.ok and "between 1 and 500" in reply.reason


async def test_an_alarm_that_cannot_be_announced_leaves_the_record(tmp_path: Path) -> None:
    async def broken(subject: str, body: bytes) -> None:
        raise OSError("connection lost")

    async def last_seq() -> int | None:
        return None

    store = SqliteAuditStore(tmp_path / "audit.db")
    service = Audit(store, last_seq, keys=KEYS, announce=broken)
    await _intake(service, 1, *_security(SecurityKind.APPROVAL_REFUSED, "r1"))
    assert [a.sequence for a in (await service.alarms(10)).alarms] == [1]
    assert (await service.verify()).ok
    await store.close()
