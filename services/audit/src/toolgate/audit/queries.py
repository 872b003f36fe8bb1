"""Request and reply bodies of the audit service's queries (``tg.audit.trail`` / ``.verify``)."""

from __future__ import annotations

import msgspec

from toolgate.audit.domain import AuditRecord, VerifyResult

__all__ = ["TrailQuery", "TrailReply", "VerifyReply"]


class TrailQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.audit.trail``."""

    request_id: str


class TrailReply(msgspec.Struct, frozen=True, kw_only=True):
    """Every record of one request, in bus (stream sequence) order."""

    ok: bool
    reason: str
    records: list[AuditRecord] = []


class VerifyReply(msgspec.Struct, frozen=True, kw_only=True):
    """The chain check, and whether every stream event reached the chain.

    Attributes:
        ok: the chain verifies, no stream sequence is missing and the chain follows stream order.
        result: the chain check.
        total: records in the chain.
        missing_stream_seqs: stream sequences never audited (first few), oldest first.
        out_of_stream_order: chain positions holding an event appended after a later one (first few).
        audited_last_seq: highest audited stream sequence.
        stream_last_seq: the stream's last sequence when asked (audit may still be catching up).
    """

    ok: bool
    result: VerifyResult
    total: int
    missing_stream_seqs: list[int] = []
    out_of_stream_order: list[int] = []
    audited_last_seq: int | None = None
    stream_last_seq: int | None = None
