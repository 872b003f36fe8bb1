"""Request and reply bodies of the audit service's queries (``tg.audit.trail`` / ``.verify`` / ``.requests``)."""

from __future__ import annotations

from datetime import datetime

import msgspec

from toolgate.audit.domain import VerifyResult
from toolgate.audit.signatures import SignatureFault
from toolgate.contracts.rpc.audit import EXPORT_PAGE, ExportQuery, ExportReply, TrailQuery, TrailReply

__all__ = [
    "EXPORT_PAGE",
    "MAX_REQUESTS",
    "ExportQuery",
    "ExportReply",
    "RequestSummary",
    "RequestsQuery",
    "RequestsReply",
    "TrailQuery",
    "TrailReply",
    "VerifyReply",
]


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


class VerifyReply(msgspec.Struct, frozen=True, kw_only=True):
    """The chain check, and whether every stream event reached the chain.

    Attributes:
        ok: the chain verifies, every signed event's signature verifies, no stream sequence is
            missing and the chain follows stream order.
        result: the chain check.
        total: records in the chain.
        missing_stream_seqs: stream sequences never audited (first few), oldest first.
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
    out_of_stream_order: list[int] = []
    audited_last_seq: int | None = None
    stream_last_seq: int | None = None
    bad_signatures: list[SignatureFault] = []
    bad_signature_count: int = 0
    differing_from_stream: list[int] = []
    differing_count: int = 0
    unanchored: int = 0
