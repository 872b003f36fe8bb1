"""Errors of the approvals service."""

from __future__ import annotations

from effectgate.contracts.errors import EffectgateError, IndexLost, StoreUnavailable

__all__ = ["ApprovalStoreUnavailable", "ApprovalsError", "ContentsUnavailable", "DecideRefused", "store_lost"]


class ApprovalsError(EffectgateError):
    """Root of the approvals service's errors."""


class DecideRefused(ApprovalsError):
    """The approve/reject command is refused; nothing changed."""


class ApprovalStoreUnavailable(ApprovalsError, StoreUnavailable):
    """The approval store could not answer."""


class ContentsUnavailable(ApprovalsError):
    """No signed, fresh answer from the executor about the call's file references (transient: retried)."""


def store_lost() -> IndexLost:
    """The approval store has no epoch marker: it lost its state; rebuilt from the stream, then retried."""
    return IndexLost("approval_store_rebuilding", "the approval store is being rebuilt from the stream; try again")
