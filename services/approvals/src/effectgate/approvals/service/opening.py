"""Opening an approval on a signed decision, ending the request whose approval cannot open, listing, expiring."""

from __future__ import annotations

import logging
import uuid

import msgspec

from effectgate.approvals.announcer import note_approval
from effectgate.approvals.domain import ApprovalState, DecideReply, PendingApproval, open_pending, requested_event
from effectgate.approvals.errors import ApprovalsError, ContentsUnavailable
from effectgate.approvals.listing import listed
from effectgate.approvals.related import related_to
from effectgate.approvals.service.core import Workflow
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.errors import IndexLost
from effectgate.contracts.events import DecisionMade
from effectgate.contracts.integrity.signing import sign_event, verify_event
from effectgate.contracts.rpc.contents import ContentQuery, valid_contents
from effectgate.contracts.tools.contents import ContentState
from effectgate.contracts.vocabulary import Verdict

__all__ = ["Opening"]

log = logging.getLogger("effectgate.approvals")


class Opening(Workflow):
    """The steps of an approval that no approver takes: open, give up, list, expire."""

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
        except (ApprovalsError, IndexLost) as error:
            return DecideReply(ok=False, reason_code=error.reason_code, reason=error.reason)

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
