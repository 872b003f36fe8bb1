"""A record is what the audit derives from its stream message; any edit shows against the stream."""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
import pytest

from effectgate.audit.anchoring import Anchoring, differs
from effectgate.audit.domain import AuditRecord, next_record
from effectgate.audit.intake import entry_of

DATA = b'{"type": "receipt.issued", "request_id": "r1", "principal": "p", "occurred_at": "2026-11-30T10:00:00Z"}'
SUBJECT = "tg.receipt.p.r1"


def _record() -> AuditRecord:
    return next_record(None, entry_of(SUBJECT, DATA, None, 7, "2026-11-30T10:00:01Z"))


def test_a_record_as_recorded_matches_its_message() -> None:
    assert not differs(_record(), SUBJECT, DATA, None)


@pytest.mark.parametrize(
    "edit",
    [
        {"payload": DATA.decode().replace("receipt.issued", "receipt.note")},
        {"event_type": "receipt.note"},
        {"subject": "tg.note.p.r1"},
        {"principal": "q"},
        {"request_id": "r2"},
        {"occurred_at": "2020-01-01T00:00:00Z"},
    ],
)
def test_an_edited_field_differs_from_the_stream(edit: dict[str, str]) -> None:
    edited = msgspec.structs.replace(_record(), **edit)
    assert differs(edited, SUBJECT, DATA, None)  # whatever its hashes: they are not compared here


async def _records(*records: AuditRecord) -> AsyncIterator[AuditRecord]:
    for record in records:
        yield record


async def test_anchoring_counts_what_differs_and_what_the_stream_no_longer_holds() -> None:
    kept, edited = _record(), msgspec.structs.replace(_record(), sequence=2, stream_seq=8, event_type="x")
    gone = msgspec.structs.replace(_record(), sequence=3, stream_seq=9)
    messages = {7: (SUBJECT, DATA, None), 8: (SUBJECT, DATA, None)}

    async def stream_message(seq: int) -> tuple[str, bytes, str | None] | None:
        return messages.get(seq)

    anchoring = Anchoring(stream_message)
    await anchoring.check(_records(kept, edited, gone))
    assert (anchoring.differing, anchoring.differing_count, anchoring.unanchored) == ([2], 1, 1)
