"""The audit record, and the bodies of the audit's requests and of its alarms.

``tg.audit.trail``, ``tg.audit.export``, ``tg.audit.verify`` (no body), ``tg.audit.requests``
and ``tg.audit.alarms`` (:class:`~effectgate.contracts.bus.catalog.Rpc`).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

import msgspec

from effectgate.contracts.events import SecurityEvent

__all__ = [
    "EXPORT_PAGE",
    "MAX_ALARMS",
    "MAX_REQUESTS",
    "Alarm",
    "AlarmsQuery",
    "AlarmsReply",
    "AuditEntry",
    "AuditRecord",
    "ChainFault",
    "ExportQuery",
    "ExportReply",
    "RequestSummary",
    "RequestsQuery",
    "RequestsReply",
    "SignatureFault",
    "StreamRange",
    "TrailQuery",
    "TrailReply",
    "VerifyReply",
    "VerifyResult",
]


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


MAX_REQUESTS = 200
"""Most requests one ``tg.audit.requests`` answer lists."""


class RequestsQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.audit.requests``: the most recent requests, newest first.

    Attributes:
        principal: only this principal's requests; ``None`` for every principal.
        since: only requests stated to have occurred at or after this time (UTC); ``None``: any time.
        limit: at most this many requests (1 to :data:`MAX_REQUESTS`).
    """

    principal: str | None = None
    since: datetime | None = None
    limit: int = 50


class RequestSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One request and how it ended, from its audited events.

    Attributes:
        request_id: the request.
        principal: who asked (the token of its subject).
        requested_at: when the request says it occurred (ISO 8601 UTC, as sent by the agent).
        tool / version / operation: what it asked for (``None`` when the body was unreadable).
        verdict: the policy's decision (``execute``, ``needs_approval``, ``deny``, ``refuse``), once made.
        outcome: the receipt's outcome, once issued; ``None`` while the request is still open.
        reason_code / reason: the receipt's reason, else the decision's.
    """

    request_id: str
    principal: str | None
    requested_at: str
    tool: str | None = None
    version: str | None = None
    operation: str | None = None
    verdict: str | None = None
    outcome: str | None = None
    reason_code: str | None = None
    reason: str | None = None


class RequestsReply(msgspec.Struct, frozen=True, kw_only=True):
    """The requests a :class:`RequestsQuery` asked for, newest first; a refusal says why in ``reason``."""

    ok: bool
    reason: str
    requests: list[RequestSummary] = []


class ChainFault(StrEnum):
    """What is wrong with the first broken record of a chain."""

    SEQUENCE_GAP = "sequence_gap"
    """A sequence is skipped: a record was deleted or moved later."""
    OUT_OF_ORDER = "out_of_order"
    """A sequence is not above its predecessor's: records reordered or duplicated."""
    PREV_LINK = "prev_link_broken"
    """``prev_hash`` is not the hash of the previous record."""
    HASH_MISMATCH = "hash_mismatch"
    """The stored hash is not the hash of the record's content: a field or the payload was edited."""


class VerifyResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of verifying a chain.

    Attributes:
        ok: every record checked links and hashes correctly.
        checked: records examined; verification stops at the first broken one.
        first_broken: sequence of the first broken record, ``None`` when ``ok``.
        reason: what is wrong with that record, or a summary when ``ok``.
        reason_code: the :class:`ChainFault`, ``None`` when ``ok``.
    """

    ok: bool
    checked: int
    first_broken: int | None
    reason: str
    reason_code: ChainFault | None = None


class SignatureFault(msgspec.Struct, frozen=True, kw_only=True):
    """A record whose signature does not verify.

    Attributes:
        sequence: the record's position in the chain.
        event_type: its event type.
        reason: what is wrong (unsigned, invalid under ``<key>.pub``, no key to check it).
    """

    sequence: int
    event_type: str
    reason: str


class StreamRange(msgspec.Struct, frozen=True, kw_only=True):
    """Stream sequences ``first`` to ``last``, both included."""

    first: int
    last: int


class VerifyReply(msgspec.Struct, frozen=True, kw_only=True):
    """Answer of ``tg.audit.verify``: the chain check, and whether every stream event reached the chain.

    Attributes:
        ok: the chain verifies, every signed event's signature verifies, no stream sequence is
            missing (between its records or before its first) and the chain follows stream order.
        result: the chain check.
        total: records in the chain.
        missing_stream_seqs: stream sequences never audited (first few), oldest first.
        missing_at_start: the stream messages before the chain's first record that the stream
            still holds (its first kept sequence on): never audited; ``None`` when there are
            none or the stream could not be read (then ``stream_last_seq`` is ``None`` too).
        out_of_stream_order: chain positions holding an event appended after a later one (first few).
        audited_last_seq: highest audited stream sequence.
        stream_last_seq: the stream's last sequence when asked (audit may still be catching up).
        bad_signatures: records of a signed event type whose signature does not verify (first few).
        bad_signature_count: how many such records the chain holds.
        differing_from_stream: records that differ from the stream message they name (first
            few): the database was edited, even if its hashes were all recomputed.
        differing_count: how many records differ from their stream message.
        unanchored: records whose stream message is gone (expired), so not compared.
    """

    ok: bool
    result: VerifyResult
    total: int
    missing_stream_seqs: list[int] = []
    missing_at_start: StreamRange | None = None
    out_of_stream_order: list[int] = []
    audited_last_seq: int | None = None
    stream_last_seq: int | None = None
    bad_signatures: list[SignatureFault] = []
    bad_signature_count: int = 0
    differing_from_stream: list[int] = []
    differing_count: int = 0
    unanchored: int = 0


MAX_ALARMS = 500
"""Most alarms one ``tg.audit.alarms`` answer lists."""


class Alarm(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded security event, as announced and as listed.

    Attributes:
        sequence: its position in the audit chain.
        stream_seq: its stream sequence.
        service: the reporting service, from its subject ``tg.security.<service>.<kind>``
            (NATS permissions vouch for that token, not for the body's ``service``).
        event: the event as recorded.
    """

    sequence: int
    stream_seq: int
    service: str
    event: SecurityEvent


class AlarmsQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.audit.alarms``: the ``limit`` most recent security events (1 to :data:`MAX_ALARMS`)."""

    limit: int = 50


class AlarmsReply(msgspec.Struct, frozen=True, kw_only=True):
    """The most recent security events, oldest first; ``ok=False`` names what was wrong with the query."""

    ok: bool
    reason: str
    alarms: list[Alarm] = []
