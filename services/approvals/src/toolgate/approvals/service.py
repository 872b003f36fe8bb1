"""The approvals workflow over its ports: open on decision, answer, expire.

Publishing is injected (``publish(subject, event)``), so this module does no I/O of
its own. Every outgoing grant or rejection is signed with the approvals key: the
executor runs nothing on an unsigned or foreign approval.

Before a grant, the call is re-checked with the policy service (``tg.policy.recheck``):
if the current policy, principal directory or tool registry no longer allows it with
this approver's approval, the approval ends rejected with the reason naming what
changed, and the approver is told so in the reply. Without an answer nothing is granted.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from toolgate.approvals.domain import (
    ApprovalState,
    DecideCommand,
    DecideReply,
    PendingApproval,
    answerable,
    command_of,
    open_pending,
    rejection_reason,
    requested_event,
)
from toolgate.approvals.errors import ApprovalsError, DecideRefused
from toolgate.approvals.ports import ApprovalsBus, ApprovalStore
from toolgate.shared.catalog import Rpc, Subjects
from toolgate.shared.events import ApprovalGranted, ApprovalRejected, DecisionMade, decode_untrusted
from toolgate.shared.recheck import RecheckQuery, valid_answer
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.secret_arguments import redact_sealed
from toolgate.shared.security import SecurityKind
from toolgate.shared.settle import Settle
from toolgate.shared.signing import sign_event, verify_event

__all__ = ["Approvals"]

log = logging.getLogger("toolgate.approvals")

Publish = Callable[[str, Any], Awaitable[object]]
PUBLISH_ATTEMPTS = 3
"""Attempts to publish a grant or rejection the store already recorded."""
MAX_COMMAND_BYTES = 4096
"""Largest accepted approve/reject command, bytes."""
_decision = msgspec.json.Decoder(DecisionMade)


@dataclass
class Approvals:
    """The approvals workflow.

    Attributes:
        store: pending approvals.
        bus: the stream (has the request ended?) and the policy re-check.
        approvers: approver name to role names.
        key: the approvals signing key.
        policy_key: the policy public key (decisions are verified before use).
        publish: ``publish(subject, event)`` onto the stream.
        clock: current UTC time.
        ttl: how long an approval stays open.
        reporter: reports every refused answer (``approval_refused``) as a security event.
    """

    store: ApprovalStore
    bus: ApprovalsBus
    approvers: Mapping[str, frozenset[str]]
    key: Ed25519PrivateKey
    policy_key: Ed25519PublicKey
    publish: Publish
    clock: Callable[[], datetime]
    ttl: timedelta
    reporter: SecurityReporter = field(default_factory=lambda: SecurityReporter("approvals"))

    async def on_decision(self, decision: DecisionMade) -> bool:
        """Open an approval for a signed ``needs_approval`` decision; ``False`` if it is forged."""
        if not verify_event(decision, self.policy_key):
            return False
        pending = open_pending(decision, self.clock(), self.ttl)
        if pending is None or await self.bus.has_receipt(decision.principal, decision.request_id):
            return True  # not an approval, or the request already ended: nothing to approve
        if not await self.store.open(pending):
            pending = await self.store.get(pending.approval_id) or pending
        await self.publish(
            Subjects.approval("requested", pending.principal, pending.request_id),
            requested_event(pending, self.clock()),
        )
        return True

    async def on_decision_bytes(self, data: bytes) -> Settle:
        """Handle one delivered decision.

        Returns:
            ``ACK`` when handled, ``TERM`` for an undecodable or forged decision.

        Raises:
            ApprovalsError: the store cannot answer (the consumer retries, then gives up).
        """
        try:
            decision = decode_untrusted(_decision, data)
        except msgspec.DecodeError:
            return Settle.TERM
        return Settle.ACK if await self.on_decision(decision) else Settle.TERM

    async def give_up_bytes(self, data: bytes) -> None:
        """The consumer's give-up: end the request of a decision whose approval could not be opened."""
        try:
            decision = decode_untrusted(_decision, data)
        except msgspec.DecodeError:
            return
        await self.give_up(decision)

    async def list_pending(self) -> list[PendingApproval] | DecideReply:
        """Pending approvals (a sealed secret shown as ``«sealed secret»``), or a refusal if the store is unreadable."""
        try:
            return [_listed(pending) for pending in await self.store.list_pending()]
        except ApprovalsError as error:
            return DecideReply(ok=False, reason_code=error.reason_code, reason=error.reason)

    async def answer_bytes(self, approver: str, data: bytes) -> DecideReply:
        """Decode and carry out one approve/reject command; never raises for its content.

        An oversized or malformed command is refused and reported (its SHA-256, not its bytes).
        """
        command = command_of(data, MAX_COMMAND_BYTES)
        if isinstance(command, DecideRefused):
            return self._refusal(approver, command, payload=data)
        try:
            return await self.answer(approver, command)
        except ApprovalsError as error:
            return _refused(error.reason_code, error.reason)

    async def give_up(self, decision: DecisionMade) -> None:
        """End a ``needs_approval`` request whose approval cannot be opened (its last delivery failed).

        Publishes a signed rejection, so the executor issues a ``denied`` receipt: the
        request ends instead of being lost.
        """
        if not verify_event(decision, self.policy_key):
            return
        pending = open_pending(decision, self.clock(), self.ttl)
        if pending is not None:
            await self._announce(pending, ApprovalState.REJECTED, None, "", code="approval_store_unavailable")

    async def answer(self, approver: str, command: DecideCommand) -> DecideReply:
        """Grant or reject one approval as ``approver`` (the transport's subject token).

        A refusal of the attempt itself (unknown approval, approver or role, self-approval,
        expired, already answered) is reported as ``approval_refused``; a call the policy
        no longer allows is refused without a report (nobody attempted anything wrong).
        """
        pending = await self.store.get(command.approval_id)
        try:
            pending = answerable(pending, command.approval_id, approver, self.approvers, self.clock())
        except DecideRefused as refused:
            return self._refusal(approver, refused, command.approval_id, pending)
        try:
            if command.approve:
                await self._still_allowed(pending, approver)
        except DecideRefused as refused:
            return _refused(refused.reason_code, refused.reason)
        state = ApprovalState.GRANTED if command.approve else ApprovalState.REJECTED
        if not await self.store.resolve(pending.approval_id, state, uuid.uuid4().hex):
            answered = DecideRefused("not_pending", f"{pending.approval_id} was answered already")
            return self._refusal(approver, answered, pending.approval_id, pending)
        await self._announce(pending, state, approver, command.note)
        return DecideReply(
            ok=True,
            reason_code=state.value,
            reason=f"{pending.approval_id} {state.value} by {approver}",
            approval_id=pending.approval_id,
        )

    async def _still_allowed(self, pending: PendingApproval, approver: str) -> None:
        """Re-check the call with the policy now; end the approval when it may no longer run.

        Raises:
            DecideRefused: ``policy_unreachable`` (nothing changed; try again), or the
                policy's reason code when the call can no longer be approved (the approval
                then ended rejected).
        """
        query = RecheckQuery(
            principal=pending.principal,
            request=pending.request,
            request_hash=pending.request_hash,
            version_pinned=pending.version_pinned,
            approver=approver,
        )
        answer = await self.bus.recheck(query)
        if answer is None or not valid_answer(answer, query, self.policy_key, self.clock()):
            raise DecideRefused("policy_unreachable", "the policy service did not re-check the call; try again")
        if answer.allowed:
            return
        if await self.store.resolve(pending.approval_id, ApprovalState.REJECTED, uuid.uuid4().hex):
            await self._announce(pending, ApprovalState.REJECTED, None, answer.reason, code=answer.reason_code)
        raise DecideRefused(answer.reason_code, f"the call can no longer be approved: {answer.reason}")

    def _refusal(
        self,
        approver: str,
        refused: DecideRefused,
        approval_id: str | None = None,
        pending: PendingApproval | None = None,
        payload: bytes | None = None,
    ) -> DecideReply:
        """Report one refused answer as a security event (never blocks) and return the refusal."""
        self.reporter.report(
            SecurityKind.APPROVAL_REFUSED,
            actor=approver,
            principal=pending.principal if pending else None,
            request_id=pending.request_id if pending else None,
            approval_id=approval_id,
            subject=Rpc.approvals_decide(approver),
            reason_code=refused.reason_code,
            detail=refused.reason,
            payload=payload,
        )
        return _refused(refused.reason_code, refused.reason)

    async def expire_due(self) -> int:
        """Expire every approval past its expiry; return how many this call expired.

        One approval that cannot be expired (a failed publish) is logged and tried again
        at the next sweep; it never stops the others.
        """
        expired = 0
        for approval_id in await self.store.due(self.clock()):
            try:
                expired += await self._expire(approval_id)
            except Exception:  # logged; retried at the next sweep
                log.exception("could not expire %s; trying again at the next sweep", approval_id)
        return expired

    async def _expire(self, approval_id: str) -> int:
        pending = await self.store.get(approval_id)
        if pending is None or not await self.store.resolve(approval_id, ApprovalState.EXPIRED, f"sweep:{approval_id}"):
            return 0
        await self._announce(pending, ApprovalState.EXPIRED, None, "")
        return 1

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
                **common, reason_code=code, reason=rejection_reason(code, approver, note), approver=approver
            )
        kind = "granted" if isinstance(event, ApprovalGranted) else "rejected"
        await self._publish_retried(
            Subjects.approval(kind, pending.principal, pending.request_id), sign_event(event, self.key)
        )

    async def _publish_retried(self, subject: str, event: Any) -> None:
        """Publish an answer the store already recorded, retrying it (the stream deduplicates its event id).

        The store will not let the approval be answered a second time, so the answer must get out.

        Raises:
            Exception: the last attempt's failure (the request then ends by the executor's backstop).
        """
        for attempt in range(PUBLISH_ATTEMPTS):
            try:
                await self.publish(subject, event)
                return
            except Exception:
                if attempt == PUBLISH_ATTEMPTS - 1:
                    raise
                log.warning("publishing %s failed; trying again", subject)
                await asyncio.sleep(0.5 * (attempt + 1))


def _listed(pending: PendingApproval) -> PendingApproval:
    """A pending approval as listed: the request hash binds the envelopes, people see a label."""
    arguments = redact_sealed(pending.request.arguments)
    return msgspec.structs.replace(pending, request=msgspec.structs.replace(pending.request, arguments=arguments))


def _refused(code: str, reason: str) -> DecideReply:
    return DecideReply(ok=False, reason_code=code, reason=reason)
