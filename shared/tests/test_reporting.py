"""Security events: what a report holds, how reports are bounded, and that reporting never breaks its caller."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec
import nats.errors
import pytest
from nats.js import JetStreamContext

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import SecurityEvent, decode_event
from effectgate.contracts.security import DETAIL_MAX_CHARS, SecurityKind, digest, violation_of
from effectgate.shared.runtime.reporting import SecurityReporter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _recording(**options: Any) -> tuple[SecurityReporter, list[tuple[str, SecurityEvent]], Clock]:
    clock, published = Clock(), list[tuple[str, SecurityEvent]]()

    async def publish(subject: str, event: SecurityEvent) -> None:
        published.append((subject, event))

    reporter = SecurityReporter("approvals", clock=clock, **options)
    reporter.attach_publish(publish)
    return reporter, published, clock


async def test_a_report_is_published_on_the_services_subject_with_every_field() -> None:
    reporter, published, _ = _recording()
    assert reporter.report(
        SecurityKind.APPROVAL_REFUSED,
        actor="mallory",
        principal="a1",
        request_id="r1",
        approval_id="ap-1",
        subject="tg.approvals.decide.mallory",
        reason_code="unknown_approver",
        detail="'mallory' is not a configured approver",
    )
    await reporter.flush()
    [(subject, event)] = published
    assert subject == "tg.security.approvals.approval_refused"
    assert (event.kind, event.service, event.actor, event.principal) == (
        "approval_refused",
        "approvals",
        "mallory",
        "a1",
    )
    assert (event.request_id, event.approval_id, event.reason_code) == ("r1", "ap-1", "unknown_approver")
    assert isinstance(decode_event(msgspec.json.encode(event)), SecurityEvent)


@pytest.mark.parametrize(
    "hostile",
    ["token\nwith newline", "a.b", "x" * 65, "ap-1 OR 1=1", "sk_live_" + "9" * 40 + ".oops", "é"],
)
async def test_identifiers_that_are_not_tokens_are_recorded_as_digests(hostile: str) -> None:
    reporter, published, _ = _recording()
    reporter.report(SecurityKind.APPROVAL_REFUSED, actor=hostile, approval_id=hostile, principal=hostile)
    await reporter.flush()
    [(_, event)] = published
    assert event.actor == event.approval_id == event.principal == digest(hostile)
    assert hostile not in msgspec.json.encode(event).decode()


async def test_a_refused_body_is_recorded_as_its_digest_and_the_detail_is_bounded() -> None:
    reporter, published, _ = _recording()
    body = b'{"approval_id": "ap-1", "approve": true, "password": "hunter2hunter2"}'
    reporter.report(SecurityKind.APPROVAL_REFUSED, detail="x\x1b[31m" + "y" * 1000, payload=body)
    await reporter.flush()
    [(_, event)] = published
    assert event.payload_sha256 == digest(body) and b"hunter2" not in msgspec.json.encode(event)
    assert len(event.detail) == DETAIL_MAX_CHARS and event.detail.endswith("…") and "\x1b" not in event.detail


async def test_a_body_too_big_to_keep_is_recorded_by_the_digest_given() -> None:
    reporter, published, _ = _recording()
    body = b"A" * 100
    reporter.report(SecurityKind.APPROVAL_REFUSED, reason_code="oversized", payload_sha256=digest(body))
    reporter.report(SecurityKind.APPROVAL_REFUSED, payload=b"kept", payload_sha256=digest(body))
    await reporter.flush()
    assert [event.payload_sha256 for _, event in published] == [digest(body), digest(b"kept")]


async def test_identical_reports_count_once_per_window_and_different_ones_each() -> None:
    reporter, published, clock = _recording(window_s=60.0)
    for _ in range(5):
        reporter.report(SecurityKind.DECISION_FORGED, subject="tg.decision.a.r1", detail="unsigned")
    assert not reporter.report(SecurityKind.DECISION_FORGED, subject="tg.decision.a.r1", detail="unsigned")
    assert reporter.report(SecurityKind.DECISION_FORGED, subject="tg.decision.a.r2", detail="unsigned")
    assert reporter.report(SecurityKind.APPROVAL_FORGED, subject="tg.decision.a.r1", detail="unsigned")
    clock.now += 60.0
    assert reporter.report(SecurityKind.DECISION_FORGED, subject="tg.decision.a.r1", detail="unsigned")
    await reporter.flush()
    assert [e.subject for _, e in published] == [
        "tg.decision.a.r1",
        "tg.decision.a.r2",
        "tg.decision.a.r1",
        "tg.decision.a.r1",
    ]


async def test_a_flood_is_capped_per_window_and_the_suppressed_count_logged(caplog: pytest.LogCaptureFixture) -> None:
    reporter, published, clock = _recording(window_s=60.0, max_per_window=10)
    admitted = [reporter.report(SecurityKind.PERMISSION_VIOLATION, subject=f"_INBOX_x.{n}") for n in range(50)]
    assert admitted == [True] * 10 + [False] * 40
    clock.now += 61.0
    with caplog.at_level(logging.WARNING, logger="effectgate.security"):
        assert reporter.report(SecurityKind.PERMISSION_VIOLATION, subject="_INBOX_x.after")
    await reporter.flush()
    assert len(published) == 11
    assert any("40 more reports by approvals suppressed" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize(
    "failure", [nats.errors.TimeoutError(), nats.errors.ConnectionClosedError(), RuntimeError("broken")]
)
async def test_a_failed_publish_is_logged_and_never_reaches_the_caller(
    failure: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    async def publish(subject: str, event: SecurityEvent) -> None:
        raise failure

    reporter = SecurityReporter("executor")
    reporter.attach_publish(publish)
    with caplog.at_level(logging.WARNING, logger="effectgate.security"):
        assert reporter.report(SecurityKind.DECISION_FORGED, request_id="r1", detail="unsigned")
        await reporter.flush()
    messages = [record.getMessage() for record in caplog.records]
    assert any("decision_forged seen by executor" in m for m in messages)
    assert any("could not publish tg.security.executor.decision_forged" in m for m in messages)


async def test_a_publish_that_hangs_does_not_hold_up_the_caller() -> None:
    release = asyncio.Event()

    async def publish(subject: str, event: SecurityEvent) -> None:
        await release.wait()

    reporter = SecurityReporter("executor")
    reporter.attach_publish(publish)
    started = asyncio.get_running_loop().time()
    reporter.report(SecurityKind.DECISION_FORGED, detail="unsigned")
    assert asyncio.get_running_loop().time() - started < 0.05
    release.set()
    await reporter.flush()


async def test_before_attaching_a_report_is_only_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="effectgate.security"):
        assert SecurityReporter("policy").report(SecurityKind.PERMISSION_VIOLATION, subject="tg.x")
    assert any("permission_violation seen by policy" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('nats: Permissions Violation for Publish to "tg.decision.a.r1"', ("publish", "tg.decision.a.r1")),
        ('nats: permissions violation for publish to "_inbox_ghost.1"', ("publish", "_inbox_ghost.1")),
        ('nats: Permissions Violation for Subscription to "tg.>" using queue "q"', ("subscription", "tg.>")),
        ("nats: Authorization Violation", None),
        ("nats: stale connection", None),
        ("nats: timeout", None),
    ],
)
async def test_the_error_callback_reports_permission_violations_only(
    text: str, expected: tuple[str, str] | None
) -> None:
    assert violation_of(nats.errors.Error(text)) == expected
    reporter, published, _ = _recording()
    await reporter.on_error(nats.errors.Error(text))
    await reporter.flush()
    if expected is None:
        assert published == []
        return
    [(subject, event)] = published
    assert subject == Subjects.security("approvals", "permission_violation")
    assert (event.actor, event.subject, event.reason_code) == ("approvals", expected[1], f"{expected[0]}_refused")


async def test_reports_reach_the_stream_once_each(js: JetStreamContext, ns: str) -> None:
    """On a real JetStream: the event is stored on its subject, with its event id as ``Nats-Msg-Id``."""
    reporter = SecurityReporter(f"svc{ns}")
    reporter.attach(js)
    reporter.report(SecurityKind.RECEIPT_FORGED, request_id=ns, detail="unsigned")
    await reporter.flush()
    subject = Subjects.security(f"svc{ns}", "receipt_forged")
    stored = await js.get_last_msg(catalog.STREAM, subject)
    event = decode_event(stored.data or b"")
    assert isinstance(event, SecurityEvent) and event.request_id == ns
    assert stored.headers and stored.headers["Nats-Msg-Id"] == event.event_id
