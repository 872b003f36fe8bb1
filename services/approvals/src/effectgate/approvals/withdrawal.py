"""Withdrawal by the requester: ``tg.approvals.withdraw.<principal>`` ends one's own pending call.

The principal is the subject's last token (the transport's identity; NATS lets agent ``<p>``
publish only on its own withdraw subject), never a field of the body.
"""

from __future__ import annotations

import uuid

from effectgate.approvals.domain import (
    ApprovalState,
    PendingApproval,
    withdraw_command_of,
    withdraw_refused,
    withdrawable,
)
from effectgate.approvals.errors import ApprovalsError
from effectgate.approvals.service import Approvals
from effectgate.contracts.approval_ids import approval_id_for
from effectgate.contracts.errors import IndexLost
from effectgate.contracts.rpc.approvals import MAX_WITHDRAW_BYTES, WithdrawCode, WithdrawCommand, WithdrawReply

__all__ = ["withdraw", "withdraw_bytes"]


async def withdraw_bytes(approvals: Approvals, principal: str, data: bytes) -> WithdrawReply:
    """Decode and carry out one withdraw command of ``principal`` (the subject token); never raises for its content.

    Returns:
        ``withdrawn`` (ok), ``not_pending``, ``not_open``, ``malformed``, ``oversized``,
        ``index_lost`` or ``approval_store_unavailable`` (the last three transient: ask again).
    """
    command = withdraw_command_of(data, MAX_WITHDRAW_BYTES)
    if isinstance(command, WithdrawReply):
        return command
    try:
        return await withdraw(approvals, principal, command)
    except IndexLost:
        return withdraw_refused(WithdrawCode.INDEX_LOST, "the approvals index is being rebuilt; try again")
    except ApprovalsError as error:
        return withdraw_refused(WithdrawCode.STORE_UNAVAILABLE, error.reason)


async def withdraw(approvals: Approvals, principal: str, command: WithdrawCommand) -> WithdrawReply:
    """End the pending approval of ``principal``'s request ``command.request_id`` as withdrawn.

    Raises:
        IndexLost: the store lost its state and is being rebuilt.
        ApprovalsError: the store cannot be reached.
        Exception: the rejection could not be published after the store recorded it
            (the request then ends by the executor's backstop).
    """
    pending = await _pending_of(approvals, principal, command.request_id)
    if pending is None and (early := await _not_open(approvals, principal, command.request_id)) is not None:
        return early
    if pending is None or not withdrawable(pending, principal, command.request_id, approvals.clock()):
        return _not_pending(command.request_id)
    if not await approvals.store.resolve(pending.approval_id, ApprovalState.REJECTED, uuid.uuid4().hex):
        return _not_pending(command.request_id)  # answered or expired meanwhile
    ended = await approvals.after(pending)
    await approvals.announcer.outcome(ended, ApprovalState.REJECTED, None, "", code=WithdrawCode.WITHDRAWN.value)
    reason = f"request {command.request_id} withdrawn: {pending.approval_id} ended, its receipt is denied (withdrawn)"
    code = WithdrawCode.WITHDRAWN.value
    return WithdrawReply(ok=True, reason_code=code, reason=reason, approval_id=pending.approval_id)


async def _pending_of(approvals: Approvals, principal: str, request_id: str) -> PendingApproval | None:
    """The approval that answers ``principal``'s ``request_id`` (opened or joined), or ``None``."""
    approval_id = await approvals.store.answering(approval_id_for(principal, request_id))
    return None if approval_id is None else await approvals.store.get(approval_id)


async def _not_open(approvals: Approvals, principal: str, request_id: str) -> WithdrawReply | None:
    """``not_open`` when the request's approval is not open yet (:mod:`effectgate.approvals.early`), else ``None``."""
    early = None if approvals.early is None else await approvals.early.waiting_on(principal, request_id)
    if early is None or await _pending_of(approvals, principal, request_id) is not None:  # opened meanwhile
        return None
    return withdraw_refused(WithdrawCode.NOT_OPEN, early.reason)


def _not_pending(request_id: str) -> WithdrawReply:
    return withdraw_refused(WithdrawCode.NOT_PENDING, f"no pending approval of request {request_id} for this principal")
