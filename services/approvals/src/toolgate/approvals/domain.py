"""Pure rules of approvals: opening a pending approval and who may answer it.

An approval binds the request hash of the decision (SHA-256 of the RFC 8785
canonical request), is single use (one transition out of ``pending``), expires, and
may only be answered by an approver entitled to the decision's approver role who is
not the requesting principal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum

import msgspec

from toolgate.approvals.errors import DecideRefused
from toolgate.shared.catalog import TOKEN
from toolgate.shared.events import ApprovalRequested, BoundRequest, DecisionMade, decode_untrusted
from toolgate.shared.security import safe_token
from toolgate.shared.vocabulary import Verdict

__all__ = [
    "ApprovalState",
    "DecideCommand",
    "DecideReply",
    "PendingApproval",
    "answerable",
    "approval_id_for",
    "check_answer",
    "command_of",
    "open_pending",
    "rejection_reason",
    "requested_event",
]


class ApprovalState(StrEnum):
    """Where an approval is in its single-use life."""

    PENDING = "pending"
    GRANTED = "granted"
    REJECTED = "rejected"
    EXPIRED = "expired"


class PendingApproval(msgspec.Struct, frozen=True, kw_only=True):
    """An approval waiting for an answer (as stored and as listed)."""

    approval_id: str
    request_id: str
    principal: str
    request_hash: str
    approver_role: str
    expires_at: datetime
    request: BoundRequest
    state: ApprovalState = ApprovalState.PENDING
    version_pinned: bool = False


class DecideCommand(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.approvals.decide.<approver>``: approve or reject one approval."""

    approval_id: str
    approve: bool
    note: str = ""


class DecideReply(msgspec.Struct, frozen=True, kw_only=True):
    """Answer to a :class:`DecideCommand`."""

    ok: bool
    reason_code: str
    reason: str
    approval_id: str | None = None


def approval_id_for(principal: str, request_id: str) -> str:
    """Deterministic short id ``ap-<12 hex>`` (a redelivered decision opens the same approval)."""
    return "ap-" + hashlib.sha256(f"{principal}/{request_id}".encode()).hexdigest()[:12]


def open_pending(decision: DecisionMade, now: datetime, ttl: timedelta) -> PendingApproval | None:
    """Return the approval a ``needs_approval`` decision opens, or ``None`` for other decisions."""
    if decision.verdict is not Verdict.NEEDS_APPROVAL or decision.request is None or not decision.request_hash:
        return None
    return PendingApproval(
        approval_id=approval_id_for(decision.principal, decision.request_id),
        request_id=decision.request_id,
        principal=decision.principal,
        request_hash=decision.request_hash,
        approver_role=decision.approver_role or "",
        expires_at=now + ttl,
        request=decision.request,
        version_pinned=decision.version_pinned,
    )


def check_answer(
    pending: PendingApproval, approver: str, approvers: Mapping[str, frozenset[str]], now: datetime
) -> None:
    """Check that ``approver`` may answer ``pending`` now.

    Raises:
        DecideRefused: unknown_approver, not_entitled, self_approval, not_pending or expired.
    """
    if not TOKEN.match(approver) or approver not in approvers:
        raise DecideRefused("unknown_approver", f"{approver!r} is not a configured approver")
    if approver == pending.principal:
        raise DecideRefused("self_approval", "the requesting principal cannot approve its own call")
    if pending.approver_role not in approvers[approver]:
        raise DecideRefused("not_entitled", f"{approver} lacks the role {pending.approver_role!r}")
    if pending.state is ApprovalState.EXPIRED or (pending.state is ApprovalState.PENDING and pending.expires_at <= now):
        raise DecideRefused("expired", f"{pending.approval_id} expired at {pending.expires_at.isoformat()}")
    if pending.state is not ApprovalState.PENDING:
        raise DecideRefused("not_pending", f"{pending.approval_id} is already {pending.state}")


def answerable(
    pending: PendingApproval | None,
    approval_id: str,
    approver: str,
    approvers: Mapping[str, frozenset[str]],
    now: datetime,
) -> PendingApproval:
    """Return ``pending`` when ``approver`` may answer it now (:func:`check_answer`).

    Raises:
        DecideRefused: unknown_approval (no such approval; a non-token id is shown as its
            SHA-256), or any refusal of :func:`check_answer`.
    """
    if pending is None:
        raise DecideRefused("unknown_approval", f"no approval {safe_token(approval_id)!r}")
    check_answer(pending, approver, approvers, now)
    return pending


_command = msgspec.json.Decoder(DecideCommand)


def command_of(data: bytes, max_bytes: int) -> DecideCommand | DecideRefused:
    """Decode one approve/reject command, or the refusal (``oversized``, ``malformed``) naming why not."""
    if len(data) > max_bytes:
        return DecideRefused("oversized", f"command is {len(data)} bytes; the limit is {max_bytes}")
    try:
        return decode_untrusted(_command, data)
    except msgspec.DecodeError as error:
        return DecideRefused("malformed", f"not an approve/reject command: {error}")


def rejection_reason(code: str, approver: str | None, note: str) -> str:
    """The human reason of a rejection with ``code``, with the approver's note appended."""
    text = {
        "approval_expired": "the approval expired unanswered",
        "approval_rejected": f"rejected by {approver}",
        "approval_store_unavailable": "the approval could not be opened (approval store unreachable)",
    }.get(code, "the call can no longer be approved")
    return f"{text}: {note}" if note else text


def requested_event(pending: PendingApproval, now: datetime) -> ApprovalRequested:
    """The :class:`ApprovalRequested` announcing ``pending`` (its event id is fixed per approval)."""
    return ApprovalRequested(
        event_id=f"requested:{pending.approval_id}",
        occurred_at=now,
        request_id=pending.request_id,
        principal=pending.principal,
        approval_id=pending.approval_id,
        request_hash=pending.request_hash,
        approver_role=pending.approver_role,
        expires_at=pending.expires_at,
        request=pending.request,
        version_pinned=pending.version_pinned,
    )
