"""The approvals workflow over its ports: open on decision, answer, expire.

Publishing is injected (``publish(subject, event)``), so this module does no I/O of
its own. Every outgoing grant or rejection is signed with the approvals key: the
executor runs nothing on an unsigned or foreign approval.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from toolgate.approvals.domain import (
    ApprovalState,
    DecideCommand,
    DecideReply,
    PendingApproval,
    check_answer,
    open_pending,
)
from toolgate.approvals.errors import ApprovalsError, DecideRefused
from toolgate.approvals.ports import ApprovalStore
from toolgate.shared.catalog import Subjects
from toolgate.shared.events import ApprovalGranted, ApprovalRejected, ApprovalRequested, DecisionMade, decode_untrusted
from toolgate.shared.settle import Settle
from toolgate.shared.signing import sign_event, verify_event

__all__ = ["Approvals"]

Publish = Callable[[str, Any], Awaitable[object]]
MAX_COMMAND_BYTES = 4096
"""Largest accepted approve/reject command, bytes."""
_decision = msgspec.json.Decoder(DecisionMade)
_command = msgspec.json.Decoder(DecideCommand)


@dataclass
class Approvals:
    """The approvals workflow.

    Attributes:
        store: pending approvals.
        approvers: approver name to role names.
        key: the approvals signing key.
        policy_key: the policy public key (decisions are verified before use).
        publish: ``publish(subject, event)`` onto the stream.
        clock: current UTC time.
        ttl: how long an approval stays open.
    """

    store: ApprovalStore
    approvers: Mapping[str, frozenset[str]]
    key: Ed25519PrivateKey
    policy_key: Ed25519PublicKey
    publish: Publish
    clock: Callable[[], datetime]
    ttl: timedelta

    async def on_decision(self, decision: DecisionMade) -> bool:
        """Open an approval for a signed ``needs_approval`` decision; ``False`` if it is forged."""
        if not verify_event(decision, self.policy_key):
            return False
        pending = open_pending(decision, self.clock(), self.ttl)
        if pending is None:
            return True
        if not await self.store.open(pending):
            pending = await self.store.get(pending.approval_id) or pending
        await self.publish(
            Subjects.approval("requested", pending.principal, pending.request_id), _requested(pending, self.clock())
        )
        return True

    async def on_decision_bytes(self, data: bytes, last_try: bool) -> Settle:
        """Handle one delivered decision: open its approval, or on the last try give up.

        Returns:
            ``ACK`` when handled, ``TERM`` for an undecodable or forged decision, ``RETRY``
            when the store is down and tries remain.
        """
        try:
            decision = decode_untrusted(_decision, data)
        except msgspec.DecodeError:
            return Settle.TERM
        try:
            return Settle.ACK if await self.on_decision(decision) else Settle.TERM
        except ApprovalsError:
            if not last_try:
                return Settle.RETRY
            await self.give_up(decision)
            return Settle.ACK

    async def list_pending(self) -> list[PendingApproval] | DecideReply:
        """Pending approvals, or a refusal when the store cannot be read."""
        try:
            return await self.store.list_pending()
        except ApprovalsError as error:
            return DecideReply(ok=False, reason_code=error.reason_code, reason=error.reason)

    async def answer_bytes(self, approver: str, data: bytes) -> DecideReply:
        """Decode and carry out one approve/reject command; never raises for its content."""
        if len(data) > MAX_COMMAND_BYTES:
            return _refused("oversized", f"command is {len(data)} bytes; the limit is {MAX_COMMAND_BYTES}")
        try:
            return await self.answer(approver, decode_untrusted(_command, data))
        except msgspec.DecodeError as error:
            return _refused("malformed", f"not an approve/reject command: {error}")
        except ApprovalsError as error:
            return _refused(error.reason_code, error.reason)

    async def give_up(self, decision: DecisionMade) -> None:
        """End a ``needs_approval`` request whose approval cannot be opened (store down for good).

        Publishes a signed rejection, so the executor issues a ``denied`` receipt: the
        request ends instead of being lost.
        """
        pending = open_pending(decision, self.clock(), self.ttl)
        if pending is not None:
            await self._announce(pending, ApprovalState.REJECTED, None, "", code="approval_store_unavailable")

    async def answer(self, approver: str, command: DecideCommand) -> DecideReply:
        """Grant or reject one approval as ``approver`` (the transport's subject token)."""
        try:
            pending = await self._answerable(approver, command.approval_id)
        except DecideRefused as refused:
            return DecideReply(ok=False, reason_code=refused.reason_code, reason=refused.reason)
        state = ApprovalState.GRANTED if command.approve else ApprovalState.REJECTED
        if not await self.store.resolve(pending.approval_id, state):
            return DecideReply(
                ok=False, reason_code="not_pending", reason=f"{pending.approval_id} was answered already"
            )
        await self._announce(pending, state, approver, command.note)
        return DecideReply(
            ok=True,
            reason_code=state.value,
            reason=f"{pending.approval_id} {state.value} by {approver}",
            approval_id=pending.approval_id,
        )

    async def _answerable(self, approver: str, approval_id: str) -> PendingApproval:
        pending = await self.store.get(approval_id)
        if pending is None:
            raise DecideRefused("unknown_approval", f"no approval {approval_id!r}")
        check_answer(pending, approver, self.approvers, self.clock())
        return pending

    async def expire_due(self) -> int:
        """Expire every approval past its expiry; return how many this call expired."""
        expired = 0
        for approval_id in await self.store.due(self.clock()):
            pending = await self.store.get(approval_id)
            if pending and await self.store.resolve(approval_id, ApprovalState.EXPIRED):
                await self._announce(pending, ApprovalState.EXPIRED, None, "")
                expired += 1
        return expired

    async def _announce(
        self, pending: PendingApproval, state: ApprovalState, approver: str | None, note: str, code: str = ""
    ) -> None:
        common: dict[str, Any] = {
            "event_id": f"{state.value}:{pending.approval_id}:{uuid.uuid4().hex}",
            "occurred_at": self.clock(),
            "request_id": pending.request_id,
            "principal": pending.principal,
            "approval_id": pending.approval_id,
        }
        if state is ApprovalState.GRANTED and approver:
            event: Any = ApprovalGranted(
                **common, request_hash=pending.request_hash, approver=approver, expires_at=pending.expires_at
            )
        else:
            code = code or ("approval_expired" if state is ApprovalState.EXPIRED else "approval_rejected")
            event = ApprovalRejected(
                **common, reason_code=code, reason=_reason(code, approver, note), approver=approver
            )
        kind = "granted" if isinstance(event, ApprovalGranted) else "rejected"
        await self.publish(Subjects.approval(kind, pending.principal, pending.request_id), sign_event(event, self.key))


def _refused(code: str, reason: str) -> DecideReply:
    return DecideReply(ok=False, reason_code=code, reason=reason)


def _reason(code: str, approver: str | None, note: str) -> str:
    text = {
        "approval_expired": "the approval expired unanswered",
        "approval_rejected": f"rejected by {approver}",
        "approval_store_unavailable": "the approval could not be opened (approval store unreachable)",
    }[code]
    return f"{text}: {note}" if note else text


def _requested(pending: PendingApproval, now: datetime) -> ApprovalRequested:
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
    )
