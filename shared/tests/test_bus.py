"""Publishing and reading events on a real JetStream stream."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.vocabulary import Outcome
from effectgate.shared.stores.stream import AlreadyPublished, fetch_last, publish_event


def _receipt(rid: str, event_id: str, outcome: Outcome = Outcome.SUCCEEDED) -> ReceiptIssued:
    return ReceiptIssued(
        event_id=event_id,
        occurred_at=datetime.now(UTC),
        request_id=rid,
        principal="p",
        outcome=outcome,
        reason_code="ok",
        reason="ok",
    )


async def test_a_subject_takes_only_its_first_receipt(js: JetStreamContext, ns: str) -> None:
    subject = Subjects.receipt("p", ns)
    assert await fetch_last(js, subject) is None
    first = await publish_event(js, subject, _receipt(ns, f"{ns}-1"), first_on_subject=True)
    with pytest.raises(AlreadyPublished):
        await publish_event(js, subject, _receipt(ns, f"{ns}-2", Outcome.FAILED), first_on_subject=True)
    stored = await fetch_last(js, subject)
    assert isinstance(stored, ReceiptIssued) and stored.outcome is Outcome.SUCCEEDED
    assert first.seq == (await js.get_last_msg("EFFECTGATE", subject, direct=True)).seq


async def test_the_same_event_id_is_stored_once(js: JetStreamContext, ns: str) -> None:
    subject = Subjects.receipt("p", ns)
    first = await publish_event(js, subject, _receipt(ns, ns))
    again = await publish_event(js, subject, _receipt(ns, ns))
    assert again.duplicate and again.seq == first.seq
