"""Body and answer of ``tg.records.get.<principal>``: one of the principal's own stored records.

An agent has no JetStream rights: it reads back its stored receipt (``tg.receipt.<p>.<rid>``),
decision (``tg.decision.<p>.<rid>``) or result chunk (``tg.result.<p>.<run id>.<index>``) by
asking the executor (:class:`~effectgate.contracts.bus.catalog.Rpc`, the principal is the last
token). The answer's :data:`STATUS_HEADER` holds a :class:`RecordCode`:

- ``found``: the body is the stored message's bytes, unchanged (no JSON around them, so a record
  that fitted one message fits its answer); the reader checks them as it would the stream's.
- anything else: the body is a :class:`RecordReply` naming why there is no record.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

import msgspec

from effectgate.contracts.bus.catalog import StoredRecord, stored_record_of

__all__ = ["MAX_QUERY_BYTES", "STATUS_HEADER", "RecordCode", "RecordQuery", "RecordReply", "refusal_of"]

STATUS_HEADER: Final = "Effectgate-Record"
"""The answer's header that says what its body is (a :class:`RecordCode`)."""

MAX_QUERY_BYTES: Final = 1024
"""Largest accepted query, bytes (a record's subject is under 300 bytes); a larger one is refused ``oversized``."""


class RecordCode(StrEnum):
    """What an answer on ``tg.records.get.<principal>`` says (its :data:`STATUS_HEADER`)."""

    FOUND = "found"
    """The body is the stored record, as stored."""
    NOT_FOUND = "not_found"
    """Nothing is stored on that subject (not yet, or no longer)."""
    NOT_YOURS = "not_yours"
    """The subject names another principal's record: never read for anyone but its principal."""
    NOT_A_RECORD = "not_a_record"
    """The subject is no receipt, decision or result chunk subject (another subject, a wildcard)."""
    MALFORMED = "malformed"
    """The body is not a :class:`RecordQuery`."""
    OVERSIZED = "oversized"
    """The body is larger than :data:`MAX_QUERY_BYTES`."""
    TOO_LARGE = "too_large"
    """The stored message is too large to answer with within the bus's ``max_payload``."""
    UNAVAILABLE = "unavailable"
    """Transient: the executor could not read the stream now; ask again."""


class RecordQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which record: ``subject`` is its stored subject (e.g. ``Subjects.receipt(principal, request_id)``)."""

    subject: str


class RecordReply(msgspec.Struct, frozen=True, kw_only=True):
    """The body of an answer that carries no record (its :data:`STATUS_HEADER` is not ``found``).

    Attributes:
        ok: always ``False`` (a found record is its own body).
        reason_code: a :class:`RecordCode`, as in the header.
        reason: human text naming what was wrong.
    """

    ok: bool
    reason_code: str
    reason: str


def refusal_of(principal: str, subject: str) -> tuple[RecordCode, str] | StoredRecord:
    """The record ``principal`` may read at ``subject``, or why it may not: ``(code, reason)``."""
    record = stored_record_of(subject)
    if record is None:
        return RecordCode.NOT_A_RECORD, f"{subject[:300]!r} is no receipt, decision or result chunk subject"
    if record.principal != principal:
        return RecordCode.NOT_YOURS, f"{subject!r} is another principal's {record.kind}; {principal!r} reads its own"
    return record
