"""The copy of a decision that needs approval: the one thing the approvals service consumes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from nats.js import JetStreamContext

from toolgate.contracts.catalog import Subjects
from toolgate.contracts.events import DecisionMade, decode_event
from toolgate.contracts.vocabulary import Verdict
from toolgate.policy.adapters.stream import ask_for_approval
from toolgate.shared.bus import next_message, publish_once

pytestmark = pytest.mark.connected


def _decision(rid: str, verdict: Verdict) -> DecisionMade:
    return DecisionMade(
        event_id=f"d-{rid}-{verdict.value}",
        occurred_at=datetime.now(UTC),
        request_id=rid,
        principal="demo-agent",
        verdict=verdict,
        reason_code="needs_approval" if verdict is Verdict.NEEDS_APPROVAL else "ok",
        reason="r",
    )


async def _copies(js: JetStreamContext, rid: str) -> list[Any]:
    found, seq = [], 1
    while (message := await next_message(js, Subjects.needs_approval("demo-agent", rid), seq)) is not None:
        found.append(decode_event(message.data or b""))
        seq = (message.seq or 0) + 1
    return found


@pytest.mark.parametrize("verdict", [Verdict.EXECUTE, Verdict.DENY])
async def test_a_decision_that_needs_no_approval_is_not_copied(js: JetStreamContext, ns: str, verdict: Verdict) -> None:
    decision = _decision(ns, verdict)
    await ask_for_approval(js, decision, stored=await publish_once(js, Subjects.decision("demo-agent", ns), decision))
    assert await _copies(js, ns) == []


async def test_a_decision_that_needs_approval_is_copied_once(js: JetStreamContext, ns: str) -> None:
    decision = _decision(ns, Verdict.NEEDS_APPROVAL)
    await ask_for_approval(js, decision, stored=await publish_once(js, Subjects.decision("demo-agent", ns), decision))
    await ask_for_approval(js, decision, stored=True)  # a redelivered request publishing again
    assert await _copies(js, ns) == [decision]


async def test_a_redelivered_request_copies_the_decision_stored_first(js: JetStreamContext, ns: str) -> None:
    first = _decision(ns, Verdict.NEEDS_APPROVAL)
    await publish_once(js, Subjects.decision("demo-agent", ns), first)  # then the policy stopped
    later = _decision(ns, Verdict.DENY)  # decided again (a fault denial on the last delivery)
    await ask_for_approval(js, later, stored=await publish_once(js, Subjects.decision("demo-agent", ns), later))
    assert await _copies(js, ns) == [first]


async def test_a_redelivered_request_whose_first_decision_runs_is_not_copied(js: JetStreamContext, ns: str) -> None:
    first = _decision(ns, Verdict.EXECUTE)
    await publish_once(js, Subjects.decision("demo-agent", ns), first)
    later = _decision(ns, Verdict.NEEDS_APPROVAL)  # a policy change meanwhile does not count
    await ask_for_approval(js, later, stored=await publish_once(js, Subjects.decision("demo-agent", ns), later))
    assert await _copies(js, ns) == []
