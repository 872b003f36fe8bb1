"""The executor reads a request's events from the stream: only the first, and only if it is about that request."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from toolgate.executor.adapters.stream import StreamBus
from toolgate.shared.bus import publish_event
from toolgate.shared.catalog import Subjects
from toolgate.shared.events import ApprovalGranted, DecisionMade, ReceiptIssued
from toolgate.shared.vocabulary import Outcome, Verdict

pytestmark = pytest.mark.connected


def _decision(principal: str, request_id: str, reason: str = "first") -> DecisionMade:
    return DecisionMade(
        event_id=f"d-{request_id}-{reason}",
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        principal=principal,
        verdict=Verdict.DENY,
        reason_code="x",
        reason=reason,
    )


async def test_a_copied_event_of_another_request_counts_as_absent(nc: Client, js: JetStreamContext, ns: str) -> None:
    bus, victim, other = StreamBus(nc, js), f"{ns}v", f"{ns}o"
    await publish_event(js, Subjects.decision("p", victim), _decision("p", other))
    receipt = ReceiptIssued(
        event_id=f"r-{other}",
        occurred_at=datetime.now(UTC),
        request_id=other,
        principal="p",
        outcome=Outcome.SUCCEEDED,
        reason_code="ok",
        reason="ok",
    )
    await publish_event(js, Subjects.receipt("p", victim), receipt)
    grant = ApprovalGranted(
        event_id=f"g-{other}",
        occurred_at=datetime.now(UTC),
        request_id=other,
        principal="q",
        approval_id="ap-1",
        request_hash="sha256:x",
        approver="alice",
        expires_at=datetime.now(UTC),
    )
    await publish_event(js, Subjects.approval("granted", "p", victim), grant)
    assert await bus.decision("p", victim) is None
    assert await bus.receipt("p", victim) is None
    assert (await bus.approvals("p", victim)).granted == ()


async def test_the_first_event_of_a_subject_is_the_one_read(nc: Client, js: JetStreamContext, ns: str) -> None:
    bus = StreamBus(nc, js)
    await publish_event(js, Subjects.decision("p", ns), _decision("p", ns, "first"))
    await publish_event(js, Subjects.decision("p", ns), _decision("p", ns, "later"))
    found = await bus.decision("p", ns)
    assert found is not None and found.reason == "first"
