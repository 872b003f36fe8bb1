"""Errors of the audit service."""

from __future__ import annotations

from effectgate.contracts.errors import EffectgateError

__all__ = ["AuditError", "ChainBroken", "Fenced", "StoreError"]


class AuditError(EffectgateError):
    """Root of the audit service's errors."""


class ChainBroken(AuditError):
    """The audit hash chain is broken at a given record.

    Attributes:
        sequence: 1-based chain position of the first broken record.
        reason_code: a :class:`effectgate.contracts.rpc.audit.ChainFault` value.
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


class Fenced(AuditError):
    """A writer whose lease was taken over tried to write: nothing of its batch is stored.

    Attributes:
        token: the fencing token it wrote with.
        floor: the highest token the chain has recorded (a later writer's).
    """

    def __init__(self, token: int, floor: int) -> None:
        super().__init__("fenced", f"writer token {token} is below the chain's writer token {floor}")
        self.token, self.floor = token, floor
