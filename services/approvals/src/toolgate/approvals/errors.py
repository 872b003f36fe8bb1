"""Errors of the approvals service.

::

    ApprovalsError(reason_code, reason)
    ├── DecideRefused     an approve/reject/withdraw command that may not be carried out
    │                     (unknown_approver, not_entitled, self_approval (the principal
    │                     or its operator), not_pending, expired, unknown_approval,
    │                     malformed, oversized, policy_unreachable, or the policy's code)
    ├── ApprovalStoreUnavailable  the approval store (Redis) failed or timed out
    ├── ContentsUnavailable  the executor did not report what the call's file references
    │                     name (contents_unavailable): the approval is not opened yet
    └── IndexLost         the approval store lost its state (Redis restarted empty) and
                          is being rebuilt from the stream (approval_store_rebuilding)
"""

from __future__ import annotations

from toolgate.contracts.errors import StoreUnavailable, ToolgateError

__all__ = ["ApprovalStoreUnavailable", "ApprovalsError", "ContentsUnavailable", "DecideRefused", "IndexLost"]


class ApprovalsError(ToolgateError):
    """Root of the approvals service's errors."""


class DecideRefused(ApprovalsError):
    """The approve/reject command is refused; nothing changed."""


class ApprovalStoreUnavailable(ApprovalsError, StoreUnavailable):
    """The approval store could not answer."""


class ContentsUnavailable(ApprovalsError):
    """No signed, fresh answer from the executor about the call's file references (transient: retried)."""


class IndexLost(ApprovalStoreUnavailable):
    """The approval store has no epoch marker: it lost its state; rebuilt from the stream, then retried."""

    def __init__(self) -> None:
        super().__init__("approval_store_rebuilding", "the approval store is being rebuilt from the stream; try again")
