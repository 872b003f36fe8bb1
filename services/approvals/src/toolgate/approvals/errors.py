"""Errors of the approvals service.

::

    ApprovalsError(reason_code, reason)
    ├── DecideRefused     an approve/reject command that may not be carried out
    │                     (unknown_approver, not_entitled, self_approval, not_pending,
    │                     expired, unknown_approval, malformed)
    └── StoreUnavailable  the approval store (Redis) failed or timed out
"""

from __future__ import annotations

from toolgate.shared.errors import ToolgateError

__all__ = ["ApprovalsError", "DecideRefused", "StoreUnavailable"]


class ApprovalsError(ToolgateError):
    """Root of the approvals service's errors."""


class DecideRefused(ApprovalsError):
    """The approve/reject command is refused; nothing changed."""


class StoreUnavailable(ApprovalsError):
    """The approval store could not answer."""
