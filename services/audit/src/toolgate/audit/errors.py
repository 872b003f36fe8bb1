"""Errors of the audit service.

Hierarchy::

    AuditError                 root: every error raised by toolgate.audit
    ├── ChainBroken            the hash chain does not verify (sequence, reason_code, reason)
    └── StoreError             the audit store cannot be read or written (path, reason_code, reason)

A broken chain found by verification is first a value
(:class:`toolgate.audit.domain.VerifyResult`); :class:`ChainBroken` is raised only
when a caller asks for it with ``VerifyResult.raise_if_broken()``.
"""

from __future__ import annotations

from toolgate.contracts.errors import ToolgateError

__all__ = ["AuditError", "ChainBroken", "StoreError"]


class AuditError(ToolgateError):
    """Root of the audit service's errors."""


class ChainBroken(AuditError):
    """The audit hash chain is broken at a given record.

    Attributes:
        sequence: 1-based chain position of the first broken record.
        reason_code: a :class:`toolgate.audit.domain.ChainFault` value.
        reason: what is wrong with that record.
    """

    def __init__(self, sequence: int, reason_code: str, reason: str) -> None:
        super().__init__(reason_code, reason)
        self.sequence = sequence


class StoreError(AuditError):
    """The audit store failed: cannot open, read or write its database, or is closed.

    Attributes:
        path: the database file.
        reason_code: ``"unavailable"`` (the database failed) or ``"closed"``.
        reason: the underlying error, as text.
    """

    def __init__(self, path: str, reason_code: str, reason: str) -> None:
        super().__init__(reason_code, reason)
        self.path = path
