"""Pure rules of approvals: opening a pending approval, who may answer it, and the quorum.

An approval binds the request hash of the decision (SHA-256 of the RFC 8785 canonical request),
is single use (one transition out of ``pending``), expires, and may only be answered by an
approver entitled to the decision's approver role who is neither the requesting principal nor
the person who operates it (the directory's ``operator``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from effectgate.approvals.errors import DecideRefused
from effectgate.contracts.approval_ids import approval_id_for
from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import ApprovalRequested, DecisionMade, Related, decode_untrusted
from effectgate.contracts.rpc.approvals import (
    ApprovalState,
    DecideCommand,
    DecideReply,
    PendingApproval,
    WithdrawCode,
    WithdrawCommand,
    WithdrawReply,
)
from effectgate.contracts.security import safe_token
from effectgate.contracts.vocabulary import Verdict

__all__ = [
    "ApprovalState",
    "DecideCommand",
    "DecideReply",
    "PendingApproval",
    "answerable",
    "check_answer",
    "check_voter",
    "command_of",
    "open_pending",
    "rejection_reason",
    "replayed",
    "requested_event",
    "withdraw_command_of",
    "withdraw_refused",
    "withdrawable",
]


def open_pending(
    decision: DecisionMade, now: datetime, ttl: timedelta, directory: PrincipalDirectory
) -> PendingApproval | None:
    """Return the approval a ``needs_approval`` decision opens, or ``None`` for other decisions."""
    if decision.verdict is not Verdict.NEEDS_APPROVAL or decision.request is None or not decision.request_hash:
        return None
    role = decision.approver_role or ""
    return PendingApproval(
        approval_id=approval_id_for(decision.principal, decision.request_id),
        request_id=decision.request_id,
        principal=decision.principal,
        request_hash=decision.request_hash,
        approver_role=role,
        expires_at=now + ttl,
        request=decision.request,
        version_pinned=decision.version_pinned,
        idempotency_key=decision.idempotency_key,
        side_effect_class=decision.side_effect_class,
        risk_tier=decision.risk_tier,
        policy_id=decision.policy_id,
        approvals_required=max(1, decision.approvals_required),
        approvers=directory.entitled(role, decision.principal),
        opened_at=now,
    )


def check_answer(pending: PendingApproval, approver: str, directory: PrincipalDirectory, now: datetime) -> None:
    """Check that ``approver`` may answer ``pending`` now.

    Raises:
        DecideRefused: unknown_approver, self_approval (the principal, or the person who
            operates it), not_entitled, not_pending or expired.
    """
    check_voter(approver, pending.principal, pending.approver_role, directory)
    if pending.state is ApprovalState.EXPIRED or (pending.state is ApprovalState.PENDING and pending.expires_at <= now):
        raise DecideRefused("expired", f"{pending.approval_id} expired at {pending.expires_at.isoformat()}")
    if pending.state is not ApprovalState.PENDING:
        raise DecideRefused("not_pending", f"{pending.approval_id} is already {pending.state}")


def check_voter(approver: str, principal: str | None, role: str | None, directory: PrincipalDirectory) -> None:
    """Check that ``approver`` may answer an approval of ``principal``'s call for ``role``.

    ``principal`` and ``role`` are ``None`` when not known yet (an approval not opened): only
    what can be checked is.

    Raises:
        DecideRefused: unknown_approver, self_approval (the principal, or the person who
            operates it) or not_entitled.
    """
    if not TOKEN.match(approver) or approver not in directory.approvers:
        raise DecideRefused("unknown_approver", f"{approver!r} is not a configured approver")
    if principal is not None and approver == principal:
        raise DecideRefused("self_approval", "the requesting principal cannot approve its own call")
    if principal is not None and approver == directory.operator_of(principal):
        raise DecideRefused("self_approval", f"{approver} operates {principal} and cannot approve its calls")
    if role is not None and not directory.is_approver(approver, role):
        raise DecideRefused("not_entitled", f"{approver} lacks the role {role!r}")


def answerable(
    pending: PendingApproval | None, approval_id: str, approver: str, directory: PrincipalDirectory, now: datetime
) -> PendingApproval:
    """Return ``pending`` when ``approver`` may answer it now (:func:`check_answer`).

    Raises:
        DecideRefused: unknown_approval (no such approval; a non-token id is shown as its
            SHA-256), or any refusal of :func:`check_answer`.
    """
    if pending is None:
        raise DecideRefused("unknown_approval", f"no approval {safe_token(approval_id)!r}")
    check_answer(pending, approver, directory, now)
    return pending


def replayed(pending: PendingApproval | None, approver: str, command: DecideCommand) -> DecideReply | None:
    """The answer to ``command`` when it repeats what ``approver`` already did to a finished approval.

    A grant counted ``approver``'s vote and they approve again, or they rejected it and
    reject again: ``ok`` with the current state (a double click, a replayed chat
    interaction). ``None`` for anything else, which is then checked as a new answer.
    """
    if pending is None or command.withdraw:
        return None
    again_granted = pending.state is ApprovalState.GRANTED and command.approve and approver in pending.votes
    again_rejected = pending.state is ApprovalState.REJECTED and not command.approve
    if not again_granted and not (again_rejected and pending.answered_by == approver):
        return None
    return reply_of(pending, pending.state, f"{pending.approval_id} was already {pending.state.value}", pending.votes)


def reply_of(pending: PendingApproval, code: str, reason: str, votes: tuple[str, ...]) -> DecideReply:
    """An ``ok`` reply about ``pending`` with the votes that count now (its state follows from ``code``)."""
    states = {"granted": ApprovalState.GRANTED, "rejected": ApprovalState.REJECTED}
    return DecideReply(
        ok=True,
        reason_code=code,
        reason=reason,
        approval_id=pending.approval_id,
        state=states.get(code, ApprovalState.PENDING),
        votes=votes,
        approvals_required=pending.approvals_required,
    )


_command = msgspec.json.Decoder(DecideCommand)


def command_of(data: bytes, max_bytes: int) -> DecideCommand | DecideRefused:
    """Decode one approve/reject/withdraw command, or the refusal (``oversized``, ``malformed``) naming why not."""
    if len(data) > max_bytes:
        return DecideRefused("oversized", f"command is {len(data)} bytes; the limit is {max_bytes}")
    try:
        command = decode_untrusted(_command, data)
    except msgspec.DecodeError as error:
        return DecideRefused("malformed", f"not an approve/reject command: {error}")
    if command.withdraw and command.approve:
        return DecideRefused("malformed", "a withdraw cannot also approve: send approve false with withdraw true")
    return command


def rejection_reason(code: str, approver: str | None, note: str, requester: str = "") -> str:
    """The human reason of a rejection with ``code``, with the approver's note appended.

    ``requester`` is the principal that withdrew its own call (code ``withdrawn``).
    """
    text = {
        "approval_expired": "the approval expired unanswered",
        "approval_rejected": f"rejected by {approver}",
        "approval_store_unavailable": "the approval could not be opened (the approval store, or the executor "
        "reading the files the call names, could not be reached)",
        WithdrawCode.WITHDRAWN: f"withdrawn by the requester {requester}",
    }.get(code, "the call can no longer be approved")
    return f"{text}: {note}" if note else text


_withdraw = msgspec.json.Decoder(WithdrawCommand)


def withdraw_command_of(data: bytes, max_bytes: int) -> WithdrawCommand | WithdrawReply:
    """Decode one withdraw command, or the refusal (``oversized``, ``malformed``) naming why not."""
    if len(data) > max_bytes:
        return withdraw_refused(WithdrawCode.OVERSIZED, f"command is {len(data)} bytes; the limit is {max_bytes}")
    try:
        return decode_untrusted(_withdraw, data)
    except msgspec.DecodeError as error:
        return withdraw_refused(WithdrawCode.MALFORMED, f'not a withdraw command {{"request_id": …}}: {error}')


def withdrawable(pending: PendingApproval | None, principal: str, request_id: str, now: datetime) -> bool:
    """Whether ``principal`` may withdraw ``request_id`` answered by ``pending`` now.

    Only while the approval is pending and unexpired, and only the requesting principal,
    for a request the approval answers (the one that opened it or one that joined it).
    """
    return (
        pending is not None
        and pending.state is ApprovalState.PENDING
        and pending.expires_at > now
        and pending.principal == principal
        and request_id in pending.request_ids
    )


def withdraw_refused(code: WithdrawCode, reason: str) -> WithdrawReply:
    """A refused withdrawal: nothing changed."""
    return WithdrawReply(ok=False, reason_code=code.value, reason=reason)


def requested_event(
    pending: PendingApproval, request_id: str, now: datetime, related: tuple[Related, ...] = ()
) -> ApprovalRequested:
    """The :class:`ApprovalRequested` announcing that ``pending`` answers ``request_id``.

    ``request_id`` is the approval's own request, or one that joined it (same approval id).
    """
    own = request_id == pending.request_id
    return ApprovalRequested(
        event_id=f"requested:{pending.approval_id}" + ("" if own else f":{request_id}"),
        occurred_at=now,
        request_id=request_id,
        principal=pending.principal,
        approval_id=pending.approval_id,
        request_hash=pending.request_hash,
        approver_role=pending.approver_role,
        expires_at=pending.expires_at,
        request=pending.request,
        version_pinned=pending.version_pinned,
        idempotency_key=pending.idempotency_key,
        side_effect_class=pending.side_effect_class,
        risk_tier=pending.risk_tier,
        policy_id=pending.policy_id,
        approvals_required=pending.approvals_required,
        approvers=pending.approvers,
        related=related,
        contents=pending.contents,
    )
