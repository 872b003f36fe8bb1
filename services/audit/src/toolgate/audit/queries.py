"""Request and reply bodies of the audit service's queries (``tg.audit.trail`` / ``.verify``)."""

from __future__ import annotations

import msgspec

from toolgate.audit.domain import AuditRecord, VerifyResult
from toolgate.audit.signatures import SignatureFault

__all__ = ["EXPORT_PAGE", "ExportQuery", "ExportReply", "TrailQuery", "TrailReply", "VerifyReply"]

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


class ExportQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.audit.export``: records after chain sequence ``after``, at most ``limit``."""

    after: int = 0
    limit: int = EXPORT_PAGE


class ExportReply(msgspec.Struct, frozen=True, kw_only=True):
    """One page of the chain, in chain order; ``records`` empty past its end."""

    ok: bool
    reason: str
    records: list[AuditRecord] = []
