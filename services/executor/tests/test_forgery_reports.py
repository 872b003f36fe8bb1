"""The executor names every decision and approval it refuses as not genuine (a security event), and runs nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ApprovalRejected, encode, request_hash
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Verdict
from effectgate.executor.handlers import consumers
from effectgate.shared.consumer.acks import Later, Settle
from effectgate.shared.consumer.consumers import Delivery
from effectgate.shared.runtime.reporting import SecurityReporter

WRITE = {"path": "f.txt", "content": "x"}


def _reports(harness: Any) -> list[Any]:
    events: list[Any] = []

    async def publish(subject: str, event: Any) -> None:
        events.append(event)

    harness.executor.reporter = SecurityReporter("executor")
    harness.executor.reporter.attach_publish(publish)
    return events


async def _flushed(harness: Any, events: list[Any]) -> list[tuple[str, str | None, str]]:
    await harness.executor.reporter.flush()
    return [(e.kind.value, e.request_id, e.detail) for e in events]


@pytest.mark.parametrize("forge", ["foreign_key", "unsigned", "tampered"])
async def test_a_decision_that_does_not_verify_is_reported_and_runs_nothing(
    harness: Any, sandbox: Path, forge: str
) -> None:
    events = _reports(harness)
    decision = harness.decision("write", WRITE)
    forged = {
        "foreign_key": lambda: sign_event(decision, Ed25519PrivateKey.generate()),
        "unsigned": lambda: msgspec.structs.replace(decision, signature=""),
        "tampered": lambda: msgspec.structs.replace(decision, reason="changed after signing"),
    }[forge]()
    assert await harness.executor.on_decision(forged) is Settle.TERM
    assert await _flushed(harness, events) == [("decision_forged", "r1", "not signed by the policy key")]
    assert harness.receipts == [] and not (sandbox / "f.txt").exists()


async def test_a_genuine_decision_reports_nothing(harness: Any) -> None:
    events = _reports(harness)
    assert await harness.executor.on_decision(harness.decision("read", {"path": "a.txt"})) is Settle.ACK
    assert await _flushed(harness, events) == []


def _grants(harness: Any) -> dict[str, tuple[Any, str]]:
    """Each kind of grant that must not run, and the detail it is reported with."""
    decision = harness.decision("write", WRITE, verdict=Verdict.NEEDS_APPROVAL)
    other = msgspec.structs.replace(decision.request, arguments={"path": "f.txt", "content": "other"})
    executed = harness.decision("write", WRITE, rid="r2", key="k2")
    orphan = msgspec.structs.replace(decision, request_id="r-none")
    return {
        "foreign_key": (harness.grant(decision, key=Ed25519PrivateKey.generate()), "not signed by the approvals key"),
        "other_content": (
            harness.grant(decision, request_hash(other)),
            "the grant binds other content than the request's decision",
        ),
        "no_decision": (harness.grant(orphan), "the request has no decision"),
        "not_waiting": (harness.grant(executed), "the request's decision is execute, not needs_approval"),
    }


@pytest.mark.parametrize("kind", ["foreign_key", "other_content", "no_decision", "not_waiting"])
async def test_a_grant_that_cannot_be_trusted_is_reported_and_runs_nothing(
    harness: Any, sandbox: Path, kind: str
) -> None:
    events = _reports(harness)
    grant, detail = _grants(harness)[kind]
    assert await harness.executor.on_granted(grant) is Settle.TERM
    assert await _flushed(harness, events) == [("approval_forged", grant.request_id, detail)]
    assert harness.receipts == [] and not (sandbox / "f.txt").exists()


async def test_a_grant_whose_first_decision_is_forged_reports_the_decision(harness: Any, sandbox: Path) -> None:
    decision = harness.decision("write", WRITE, verdict=Verdict.NEEDS_APPROVAL)
    harness.bus.decisions["r1"] = sign_event(decision, Ed25519PrivateKey.generate())
    events = _reports(harness)
    assert await harness.executor.on_granted(harness.grant(decision)) is Settle.TERM
    detail = "the first decision of the request is not signed by the policy key"
    assert await _flushed(harness, events) == [("decision_forged", "r1", detail)]
    assert not (sandbox / "f.txt").exists()


async def test_a_forged_rejection_is_reported_and_ends_nothing(harness: Any) -> None:
    decision = harness.decision("write", WRITE, verdict=Verdict.NEEDS_APPROVAL)
    rejection = ApprovalRejected(
        event_id="x",
        occurred_at=datetime.now(UTC),
        request_id="r1",
        principal="demo-agent",
        approval_id="ap-1",
        reason_code="approval_rejected",
        reason="no",
    )
    events = _reports(harness)
    assert await harness.executor.on_rejected(sign_event(rejection, Ed25519PrivateKey.generate())) is Settle.TERM
    assert await _flushed(harness, events) == [("approval_forged", "r1", "not signed by the approvals key")]
    assert harness.receipts == [] and decision.request_id == "r1"


def _delivery(subject: str, data: bytes) -> Delivery:
    return Delivery(subject, data, {}, 1, 1, datetime.now(UTC))


def _handler(harness: Any, spec: catalog.ConsumerSpec) -> Any:
    runtime = SimpleNamespace(executor=harness.executor, backstop=None, upkeep=None)
    return next(c.handle for c in consumers(lambda: runtime) if c.spec is spec)  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize("body", ["junk", "copied", "not_a_decision"])
async def test_a_message_that_is_not_this_requests_decision_is_reported_and_terminated(
    harness: Any, sandbox: Path, body: str
) -> None:
    events = _reports(harness)
    genuine = harness.decision("write", WRITE, rid="r9")
    data = {"junk": b"\x00not json", "copied": encode(genuine), "not_a_decision": b'{"type": "receipt.issued"}'}[body]
    subject = Subjects.decision("demo-agent", "r1")
    assert await _handler(harness, catalog.EXECUTOR_DECISIONS)(_delivery(subject, data)) is Settle.TERM
    [(kind, request_id, detail)] = await _flushed(harness, events)
    assert (kind, request_id) == ("decision_forged", "r1")
    assert ("demo-agent/r9" in detail) if body == "copied" else ("not the event" in detail)
    assert events[0].payload_sha256 is not None and harness.receipts == []


@pytest.mark.parametrize("where", ["other_request", "other_kind"])
async def test_an_approval_on_another_subject_is_reported_and_terminated(harness: Any, where: str) -> None:
    events = _reports(harness)
    decision = harness.decision("write", WRITE, verdict=Verdict.NEEDS_APPROVAL)
    subject = {
        "other_request": Subjects.approval("granted", "demo-agent", "r7"),
        "other_kind": Subjects.approval("rejected", "demo-agent", "r1"),
    }[where]
    delivery = _delivery(subject, encode(harness.grant(decision)))
    assert await _handler(harness, catalog.EXECUTOR_APPROVALS)(delivery) is Settle.TERM
    [(kind, _, detail)] = await _flushed(harness, events)
    assert (kind, detail) == (
        "approval_forged",
        "an event approval.granted about demo-agent/r1 on a subject not its own",
    )
    assert harness.receipts == []


@pytest.mark.parametrize("kind", ["requested", "voted"])
async def test_an_approval_event_that_grants_nothing_is_acknowledged_undecoded(harness: Any, kind: str) -> None:
    events = _reports(harness)
    delivery = _delivery(Subjects.approval(kind, "demo-agent", "r1"), b"\x00not json")
    assert await _handler(harness, catalog.EXECUTOR_APPROVALS)(delivery) is Settle.ACK
    assert await _flushed(harness, events) == [] and harness.receipts == []


async def test_a_decision_that_needs_approval_is_passed_over_without_its_signature_checked(
    harness: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[object] = []
    monkeypatch.setattr("effectgate.executor.verification.verify_event", lambda *args: checked.append(args) or True)
    decision = harness.decision("write", WRITE, verdict=Verdict.NEEDS_APPROVAL)
    assert await harness.executor.on_decision(decision) is Settle.ACK
    assert checked == [] and harness.receipts == []


async def test_a_young_request_is_scheduled_by_the_backstop_without_its_body_decoded(
    harness: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[object] = []
    monkeypatch.setattr("effectgate.executor.handlers.request_identity", lambda *args: decoded.append(args) or "r1")
    runtime = SimpleNamespace(executor=harness.executor, backstop=harness.backstop, upkeep=None)
    handle = next(c.handle for c in consumers(lambda: runtime) if c.spec is catalog.BACKSTOP_CONSUMER)  # type: ignore[arg-type]
    settle = await handle(_delivery(Subjects.request("demo-agent"), b'{"request_id": "r1"}'))
    assert isinstance(settle, Later) and decoded == [] and harness.receipts == []
