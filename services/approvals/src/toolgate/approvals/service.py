"""The approvals workflow over its ports: open (or join) on decision, vote, reject, withdraw, expire.

Publishing is injected (``publish(subject, event)``), so this module does no I/O of its
own; every outgoing vote, grant or rejection is signed with the approvals key
(:mod:`toolgate.approvals.announcer`): the executor runs nothing on an unsigned or
foreign approval.

An approve is a vote of one distinct entitled approver; the approval is granted when
``approvals_required`` votes are in (the store records the vote and the grant in one
step, so the quorum is granted once). Before each vote the call is re-checked with the
policy service (``tg.policy.recheck``): if the current policy, principal directory or
tool registry no longer allows it with this approver's approval, the approval ends
rejected with the reason naming what changed, and the approver is told so in the reply.
Without an answer nothing is recorded.

Before an approval opens, the executor reports what the call's declared file references
name now (``tg.executor.contents``, signed with its receipts key): those states go into the
approval, its ``ApprovalRequested`` (the card shows them) and its grant, and the executor
refuses the grant at dispatch when they changed. Without a signed, fresh answer the
approval is not opened (:class:`ContentsUnavailable`, retried; fail closed).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from toolgate.approvals.announcer import Announcer, Publish, note_approval
from toolgate.approvals.domain import (
    ApprovalState,
    DecideCommand,
    DecideReply,
    PendingApproval,
    answerable,
    command_of,
    open_pending,
    replayed,
    reply_of,
    requested_event,
)
from toolgate.approvals.early import EarlyAnswers
from toolgate.approvals.errors import ApprovalsError, ContentsUnavailable, DecideRefused
from toolgate.approvals.listing import listed
from toolgate.approvals.ports import ApprovalsBus, ApprovalStore, VoteStatus
from toolgate.approvals.related import related_to
from toolgate.contracts.catalog import Rpc, Subjects
from toolgate.contracts.contents import ContentState
from toolgate.contracts.directory import PrincipalDirectory
from toolgate.contracts.events import DecisionMade, decode_untrusted
from toolgate.contracts.recheck import RecheckQuery, valid_answer
from toolgate.contracts.rpc.approvals import APPROVAL_NOT_OPEN
from toolgate.contracts.rpc.contents import ContentQuery, valid_contents
from toolgate.contracts.security import SecurityKind
from toolgate.contracts.signing import sign_event, verify_event
from toolgate.contracts.vocabulary import Verdict
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.settle import Settle

__all__ = ["Approvals"]

log = logging.getLogger("toolgate.approvals")

MAX_COMMAND_BYTES = 4096
"""Largest accepted approve/reject/withdraw command, bytes."""
_decision = msgspec.json.Decoder(DecisionMade)


@dataclass
class Approvals:
    """The approvals workflow.

    Attributes:
        store: approvals, votes and joined requests.
        bus: the stream (has the request ended? its receipt) and the policy re-check.
        directory: approvers, their roles and the agents' operators.
        key: the approvals signing key.
        policy_key: the policy public key (decisions are verified before use).
        publish: ``publish(subject, event)`` onto the stream.
        clock: current UTC time.
        ttl: how long an approval stays open.
        executor_key: the executor's receipts public key (its readings of file references are signed).
        reporter: reports every refused answer (``approval_refused``) as a security event.
        early: tells an approval not open yet from an unknown one (``None``: every id the
            store does not hold is unknown).
    """

    store: ApprovalStore
    bus: ApprovalsBus
    directory: PrincipalDirectory
    key: Ed25519PrivateKey
    policy_key: Ed25519PublicKey
    publish: Publish
    clock: Callable[[], datetime]
    ttl: timedelta
    executor_key: Ed25519PublicKey
    reporter: SecurityReporter = field(default_factory=lambda: SecurityReporter("approvals"))
    early: EarlyAnswers | None = None

    @property
    def announcer(self) -> Announcer:
        """Signs and publishes votes, grants and rejections (with the current ``publish``)."""
        return Announcer(self.key, self.publish, self.clock)

    async def on_decision(self, decision: DecisionMade) -> bool:
        """Open (or join) the approval of a signed ``needs_approval`` decision; ``False`` if it is forged.

        Any other verdict is passed over unverified: nothing here acts on it (the executor
        verifies every decision it runs on), so checking its signature would be work for nothing.
        """
        if decision.verdict is not Verdict.NEEDS_APPROVAL:
            return True
        if not verify_event(decision, self.policy_key):
            return False
        pending = open_pending(decision, self.clock(), self.ttl, self.directory)
        if pending is None or await self.bus.has_receipt(decision.principal, decision.request_id):
            return True  # not an approval, or the request already ended: nothing to approve
        pending = msgspec.structs.replace(pending, contents=await self._contents(pending))
        approval_id = await self.store.open(pending, self.clock())
        current = await self.store.get(approval_id) or pending
        related = await related_to(current, self.store, self.bus)
        subject = Subjects.approval("requested", decision.principal, decision.request_id)
        event = requested_event(current, decision.request_id, self.clock(), related)
        # an unguessable event id: a message squatting on the subject cannot block the real one
        event = msgspec.structs.replace(event, event_id=f"{event.event_id}:{uuid.uuid4().hex}")
        await self.publish(subject, sign_event(event, self.key))  # the chat-ops bot shows only signed cards
        note_approval(current, "requested", None)
        return True

    async def _contents(self, pending: PendingApproval) -> tuple[ContentState, ...]:
        """What the call's file references name now, as the executor signed it.

        Raises:
            ContentsUnavailable: no signed, fresh answer about this request (nothing is opened).
        """
        query = ContentQuery(principal=pending.principal, request=pending.request, request_hash=pending.request_hash)
        answer = await self.bus.contents(query)
        if answer is None or not valid_contents(answer, query, self.executor_key, self.clock()):
            why = answer.reason if answer is not None and not answer.ok else "no signed answer"
            raise ContentsUnavailable("contents_unavailable", f"the executor did not read the call's files: {why}")
        return answer.contents

    async def on_decision_bytes(self, data: bytes, subject: str) -> Settle:
        """Handle one delivered decision, copied to ``tg.needs_approval.<p>.<rid>``.

        Returns:
            ``ACK`` when handled, ``TERM`` for an undecodable or forged decision, or one
            about another request than the one its subject names (a genuine decision of
            another request placed there opens nothing; the audit reports it).

        Raises:
            ApprovalsError: the store cannot answer (the consumer retries, then gives up).
        """
        try:
            decision = decode_untrusted(_decision, data)
        except msgspec.DecodeError:
            return Settle.TERM
        if subject != Subjects.needs_approval(decision.principal, decision.request_id):
            return Settle.TERM
        return Settle.ACK if await self.on_decision(decision) else Settle.TERM

    async def give_up_bytes(self, data: bytes) -> None:
        """The consumer's give-up: end the request of a decision whose approval could not be opened."""
        try:
            decision = decode_untrusted(_decision, data)
        except msgspec.DecodeError:
            return
        await self.give_up(decision)

    async def give_up(self, decision: DecisionMade) -> None:
        """End a ``needs_approval`` request whose approval cannot be opened (its last delivery failed).

        Publishes a signed rejection, so the executor issues a ``denied`` receipt: the
        request ends instead of being lost.
        """
        if not verify_event(decision, self.policy_key):
            return
        pending = open_pending(decision, self.clock(), self.ttl, self.directory)
        if pending is not None:
            await self.announcer.outcome(pending, ApprovalState.REJECTED, None, "", code="approval_store_unavailable")

    async def list_pending(self) -> list[PendingApproval] | DecideReply:
        """Pending approvals with their related ones (a sealed secret shown as ``«sealed secret»``).

        Returns a refusal instead when the store is unreadable.
        """
        try:
            pending = await self.store.list_pending()
            return [
                listed(msgspec.structs.replace(p, related=await related_to(p, self.store, self.bus))) for p in pending
            ]
        except ApprovalsError as error:
            return DecideReply(ok=False, reason_code=error.reason_code, reason=error.reason)

    async def answer_bytes(self, approver: str, data: bytes) -> DecideReply:
        """Decode and carry out one command; never raises for its content.

        An oversized or malformed command is refused and reported (its SHA-256, not its bytes).
        """
        command = command_of(data, MAX_COMMAND_BYTES)
        if isinstance(command, DecideRefused):
            return self._refusal(approver, command, payload=data)
        try:
            return await self.answer(approver, command)
        except ApprovalsError as error:
            return _refused(error.reason_code, error.reason)

    async def answer(self, approver: str, command: DecideCommand) -> DecideReply:
        """Vote for, reject, or withdraw a vote on one approval as ``approver`` (the transport's subject token).

        A refusal of the attempt itself (unknown approval, approver or role, self-approval,
        expired, already answered) is reported as ``approval_refused``; a call the policy
        no longer allows, a repeated vote, the repeat of a finished answer and an answer to
        an approval not open yet (``approval_not_open``) are not. An id a request that
        joined another approval would have had answers that approval.
        """
        found = await self._answering(approver, command.approval_id)
        if isinstance(found, DecideReply):
            return found
        pending = found
        if (again := replayed(pending, approver, command)) is not None:
            return again
        try:
            pending = answerable(pending, command.approval_id, approver, self.directory, self.clock())
        except DecideRefused as refused:
            return self._refusal(approver, refused, command.approval_id, pending)
        if command.withdraw:
            return await self._withdraw(pending, approver)
        if not command.approve:
            return await self._reject(pending, approver, command.note)
        return await self._vote(pending, approver)

    async def _answering(self, approver: str, approval_id: str) -> PendingApproval | DecideReply | None:
        """The approval an answer to ``approval_id`` is for: the one it names, or the one its request joined.

        When the store holds neither, the stream tells an approval not open yet (the reply
        ``approval_not_open``, nothing reported) from one nothing will open (``None``).
        """
        if (pending := await self._approval(approval_id)) is not None or self.early is None:
            return pending
        early = await self.early.classify(approver, approval_id)
        if (pending := await self._approval(approval_id)) is not None:  # opened meanwhile
            return pending
        if isinstance(early, DecideRefused):
            return self._refusal(approver, early, approval_id)
        if early is None:
            return None
        note_approval(None, "not_open", approver, APPROVAL_NOT_OPEN, approval_id=approval_id)
        return DecideReply(ok=False, reason_code=APPROVAL_NOT_OPEN, reason=early.reason, approval_id=approval_id)

    async def _approval(self, approval_id: str) -> PendingApproval | None:
        answering = await self.store.answering(approval_id)
        return None if answering is None else await self.store.get(answering)

    async def _vote(self, pending: PendingApproval, approver: str) -> DecideReply:
        if approver in pending.votes:
            return _already_voted(pending, approver, pending.votes)
        try:
            await self._still_allowed(pending, approver)
        except DecideRefused as refused:
            return _refused(refused.reason_code, refused.reason)
        result = await self.store.vote(pending.approval_id, approver, pending.approvals_required, uuid.uuid4().hex)
        if result.status is VoteStatus.ALREADY_VOTED:
            return _already_voted(pending, approver, result.votes)
        if result.status is VoteStatus.NOT_PENDING:
            return self._answered_meanwhile(pending, approver)
        if result.status is VoteStatus.GRANTED:
            granted = msgspec.structs.replace(await self.after(pending), votes=result.votes)
            await self.announcer.outcome(granted, ApprovalState.GRANTED, approver, "")
            reason = f"{pending.approval_id} granted by {', '.join(result.votes)}"
            return reply_of(granted, "granted", reason, result.votes)
        await self.announcer.vote(pending, approver, result.votes, withdrawn=False)
        count = f"vote {len(result.votes)} of {pending.approvals_required} recorded on {pending.approval_id}"
        return reply_of(pending, "voted", f"{count} ({', '.join(result.votes)})", result.votes)

    async def _reject(self, pending: PendingApproval, approver: str, note: str) -> DecideReply:
        if not await self.store.resolve(pending.approval_id, ApprovalState.REJECTED, uuid.uuid4().hex, approver):
            return self._answered_meanwhile(pending, approver)
        rejected = await self.after(pending)
        await self.announcer.outcome(rejected, ApprovalState.REJECTED, approver, note)
        return reply_of(rejected, "rejected", f"{pending.approval_id} rejected by {approver}", rejected.votes)

    async def _withdraw(self, pending: PendingApproval, approver: str) -> DecideReply:
        result = await self.store.withdraw(pending.approval_id, approver)
        if result.status is VoteStatus.NOT_PENDING:
            return self._answered_meanwhile(pending, approver)
        if result.status is VoteStatus.NOT_VOTED:
            return reply_of(pending, "not_voted", f"{approver} has no vote on {pending.approval_id}", result.votes)
        await self.announcer.vote(pending, approver, result.votes, withdrawn=True)
        count = f"{len(result.votes)} of {pending.approvals_required} votes"
        return reply_of(pending, "withdrawn", f"{approver}'s vote withdrawn: {count}", result.votes)

    async def after(self, pending: PendingApproval) -> PendingApproval:
        """``pending`` as the store holds it after an answer (every request that joined it); as given if unreadable."""
        try:
            return await self.store.get(pending.approval_id) or pending
        except ApprovalsError:
            log.warning("%s could not be read back: answering the requests known before", pending.approval_id)
            return pending

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
            ended = await self.after(pending)
            await self.announcer.outcome(ended, ApprovalState.REJECTED, None, answer.reason, code=answer.reason_code)
        raise DecideRefused(answer.reason_code, f"the call can no longer be approved: {answer.reason}")

    def _answered_meanwhile(self, pending: PendingApproval, approver: str) -> DecideReply:
        answered = DecideRefused("not_pending", f"{pending.approval_id} was answered already")
        return self._refusal(approver, answered, pending.approval_id, pending)

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
        note_approval(pending, "refused", approver, refused.reason_code, approval_id=approval_id)
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
        await self.announcer.outcome(await self.after(pending), ApprovalState.EXPIRED, None, "")
        return 1


def _already_voted(pending: PendingApproval, approver: str, votes: tuple[str, ...]) -> DecideReply:
    count = f"vote {len(votes)} of {pending.approvals_required}"
    return reply_of(pending, "already_voted", f"{approver} already voted on {pending.approval_id} ({count})", votes)


def _refused(code: str, reason: str) -> DecideReply:
    return DecideReply(ok=False, reason_code=code, reason=reason)
