"""Where a requester's call stands: ``tg.approvals.status.<principal>`` names the approval it waits on.

The principal is the subject's last token (NATS lets agent ``<p>`` publish only on its own
status subject); the body is ``{"request_id": …}`` (a
:class:`~effectgate.contracts.rpc.approvals.WithdrawCommand`).
"""

from __future__ import annotations

from datetime import datetime

from effectgate.approvals.domain import ApprovalState, PendingApproval, withdraw_command_of
from effectgate.approvals.early import NotOpen
from effectgate.approvals.errors import ApprovalsError
from effectgate.approvals.service import Approvals
from effectgate.contracts.approval_ids import approval_id_for
from effectgate.contracts.errors import IndexLost
from effectgate.contracts.rpc.approvals import MAX_WITHDRAW_BYTES, ApprovalStatus, StatusCode, WithdrawReply

__all__ = ["status", "status_bytes"]


async def status_bytes(approvals: Approvals, principal: str, data: bytes) -> ApprovalStatus:
    """Decode and answer one status query of ``principal`` (the subject token); never raises for its content.

    Returns:
        A state (``pending``, ``granted``, ``rejected``, ``expired``), ``not_open`` or
        ``no_approval``; ``malformed``, ``oversized``; ``index_lost`` or
        ``approval_store_unavailable`` (transient).
    """
    command = withdraw_command_of(data, MAX_WITHDRAW_BYTES)
    if isinstance(command, WithdrawReply):
        return ApprovalStatus(ok=False, reason_code=command.reason_code, reason=command.reason)
    try:
        return await status(approvals, principal, command.request_id)
    except IndexLost:
        return _refused(StatusCode.INDEX_LOST, "the approvals index is being rebuilt; ask again")
    except ApprovalsError as error:
        return _refused(StatusCode.STORE_UNAVAILABLE, error.reason)


async def status(approvals: Approvals, principal: str, request_id: str) -> ApprovalStatus:
    """The approval ``principal``'s ``request_id`` waits on (or waited on), and where it stands.

    Raises:
        IndexLost: the store lost its state and is being rebuilt.
        ApprovalsError: the store or the stream cannot be read.
    """
    own = approval_id_for(principal, request_id)
    if (found := await _answering(approvals, principal, request_id)) is not None:
        return _standing(found, request_id, approvals.clock())
    early = None if approvals.early is None else await approvals.early.waiting_on(principal, request_id)
    if (found := await _answering(approvals, principal, request_id)) is not None:  # opened meanwhile
        return _standing(found, request_id, approvals.clock())
    if isinstance(early, NotOpen):
        return ApprovalStatus(ok=False, reason_code=StatusCode.NOT_OPEN, reason=early.reason, approval_id=own)
    return _refused(StatusCode.NO_APPROVAL, f"request {request_id} of {principal} has no approval and will have none")


async def _answering(approvals: Approvals, principal: str, request_id: str) -> PendingApproval | None:
    approval_id = await approvals.store.answering(approval_id_for(principal, request_id))
    pending = None if approval_id is None else await approvals.store.get(approval_id)
    if pending is None or pending.principal != principal or request_id not in pending.request_ids:
        return None
    return pending


def _standing(pending: PendingApproval, request_id: str, now: datetime) -> ApprovalStatus:
    state = pending.state
    if state is ApprovalState.PENDING and pending.expires_at <= now:
        state = ApprovalState.EXPIRED
    joined = request_id != pending.request_id
    via = f" (joined by request {request_id})" if joined else ""
    return ApprovalStatus(
        ok=True,
        reason_code=state.value,
        reason=f"{pending.approval_id}{via} is {state.value}",
        approval_id=pending.approval_id,
        joined=joined,
        votes=pending.votes,
        approvals_required=pending.approvals_required,
        expires_at=pending.expires_at,
    )


def _refused(code: StatusCode, reason: str) -> ApprovalStatus:
    return ApprovalStatus(ok=False, reason_code=code.value, reason=reason)
