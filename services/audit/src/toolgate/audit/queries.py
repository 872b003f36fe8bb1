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
    """The chain check, and how many records the chain holds."""

    ok: bool
    result: VerifyResult
    total: int
