"""Answering an approval: vote (after the policy re-checks the call), reject, withdraw a vote."""

from __future__ import annotations

import uuid

import msgspec

from effectgate.approvals.announcer import note_approval
from effectgate.approvals.domain import (
    ApprovalState,
    DecideCommand,
    DecideReply,
    PendingApproval,
    answerable,
    replayed,
    reply_of,
)
from effectgate.approvals.errors import DecideRefused
from effectgate.approvals.ports import VoteStatus
from effectgate.approvals.service.core import Workflow, refusal_reply
from effectgate.contracts.rpc.approvals import APPROVAL_NOT_OPEN
from effectgate.contracts.rpc.recheck import RecheckQuery, valid_answer

__all__ = ["Answering"]


class Answering(Workflow):
    """The steps an approver takes on an approval."""

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
            return self.refusal(approver, refused, command.approval_id, pending)
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
            return self.refusal(approver, early, approval_id)
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
            return refusal_reply(refused.reason_code, refused.reason)
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


def _already_voted(pending: PendingApproval, approver: str, votes: tuple[str, ...]) -> DecideReply:
    count = f"vote {len(votes)} of {pending.approvals_required}"
    return reply_of(pending, "already_voted", f"{approver} already voted on {pending.approval_id} ({count})", votes)
