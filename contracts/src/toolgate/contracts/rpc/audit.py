"""The audit record, and the bodies of ``tg.audit.trail`` and ``tg.audit.export``."""

from __future__ import annotations

import msgspec

__all__ = ["AuditEntry", "AuditRecord", "EXPORT_PAGE", "ExportQuery", "ExportReply", "TrailQuery", "TrailReply"]


class AuditEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One stream message as the audit receives it, before it is chained.

    Attributes:
        stream_seq: JetStream stream sequence of the event.
        subject: NATS subject of the event.
        event_type: the event's type tag (``unparseable`` for a body that is not an event).
        request_id: the tool request the event belongs to, if any.
        principal: the principal the event concerns, if known.
        occurred_at: when the event occurred, ISO 8601 UTC.
        payload: the event JSON as received, verbatim.
    """

    stream_seq: int
    subject: str
    event_type: str
    request_id: str | None
    principal: str | None
    occurred_at: str
    payload: str


class AuditRecord(AuditEntry, frozen=True, kw_only=True):
    """One event as recorded in the audit chain: its :class:`AuditEntry` plus the chain links.

    Attributes:
        sequence: 1-based position in the chain.
        prev_hash: ``hash`` of the previous record, or :data:`GENESIS`.
        hash: ``sha256:<64 hex>`` from :func:`chain_hash`.
    """

    sequence: int
    prev_hash: str
    hash: str


EXPORT_PAGE = 500
"""Most records one ``tg.audit.export`` answer carries (well under the 1 MiB NATS payload limit
for ordinary events; a page that would not fit is refused and the caller asks for fewer)."""


class TrailQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.audit.trail``."""

    request_id: str


class TrailReply(msgspec.Struct, frozen=True, kw_only=True):
    """Every record of one request, in bus (stream sequence) order."""

    ok: bool
    reason: str
    records: list[AuditRecord] = []


class ExportQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.audit.export``: records after chain sequence ``after``, at most ``limit``."""

    after: int = 0
    limit: int = EXPORT_PAGE


class ExportReply(msgspec.Struct, frozen=True, kw_only=True):
    """One page of the chain, in chain order; ``records`` empty past its end."""

    ok: bool
    reason: str
    records: list[AuditRecord] = []
