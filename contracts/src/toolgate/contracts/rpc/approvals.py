"""Bodies of ``tg.approvals.decide.<approver>``, and the states of an approval."""

from __future__ import annotations

from enum import StrEnum

import msgspec

__all__ = ["ApprovalState", "DecideCommand", "DecideReply"]


class ApprovalState(StrEnum):
    """Where an approval is in its single-use life."""

    PENDING = "pending"
    GRANTED = "granted"
    REJECTED = "rejected"
    EXPIRED = "expired"


class DecideCommand(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.approvals.decide.<approver>``: approve (vote), reject, or withdraw one's vote.

    Attributes:
        approval_id: the approval.
        approve: ``true`` votes for it, ``false`` rejects it (unless ``withdraw``).
        note: a remark recorded with a rejection.
        withdraw: take back one's vote while the approval is pending (``approve`` must be ``false``).
    """

    approval_id: str
    approve: bool
    note: str = ""
    withdraw: bool = False


class DecideReply(msgspec.Struct, frozen=True, kw_only=True):
    """Answer to a :class:`DecideCommand`.

    Attributes:
        ok: the answer counts (or was given before: ``already_voted``, a replay).
        reason_code: ``voted``, ``granted``, ``rejected``, ``withdrawn``, ``already_voted``,
            ``not_voted``, or the refusal's code.
        reason: human text.
        approval_id: the approval answered.
        state: the approval's state after the answer.
        votes: approvers whose approval counts now.
        approvals_required: the quorum.
    """

    ok: bool
    reason_code: str
    reason: str
    approval_id: str | None = None
    state: ApprovalState | None = None
    votes: tuple[str, ...] = ()
    approvals_required: int | None = None
