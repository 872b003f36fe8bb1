"""Errors of the approvals service.

::

    ApprovalsError(reason_code, reason)
    ├── DecideRefused     an approve/reject command that may not be carried out
    │                     (unknown_approver, not_entitled, self_approval, not_pending,
    │                     expired, unknown_approval, malformed)
    └── StoreUnavailable  the approval store (Redis) failed or timed out
"""

from __future__ import annotations

__all__ = ["ApprovalsError", "DecideRefused", "StoreUnavailable"]


class ApprovalsError(Exception):
    """Root of the approvals service's errors.

    Attributes:
        reason_code: machine-readable reason.
        reason: human-readable reason naming what was wrong.
    """

    def __init__(self, reason_code: str, reason: str) -> None:
        super().__init__(f"{reason_code}: {reason}")
        self.reason_code = reason_code
        self.reason = reason


class DecideRefused(ApprovalsError):
    """The approve/reject command is refused; nothing changed."""


class StoreUnavailable(ApprovalsError):
    """The approval store could not answer."""
