"""Publishing what happened to an approval: signed votes, grants and rejections.

A grant or rejection is published on the subject of every request the approval answers (the one
that opened it and every one that joined it), each a signed event of its own: the executor runs
the effect once (its idempotency key) and replays it for the others.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.approvals.domain import ApprovalState, PendingApproval, rejection_reason
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ApprovalGranted, ApprovalRejected, ApprovalVoted
from effectgate.contracts.integrity.signing import sign_event
from effectgate.shared.consumer.request_log import note

__all__ = ["PUBLISH_ATTEMPTS", "Announcer", "Publish", "note_approval"]

log = logging.getLogger("effectgate.approvals")

Publish = Callable[[str, Any], Awaitable[object]]
PUBLISH_ATTEMPTS = 3
"""Attempts to publish an answer the store already recorded."""


def note_approval(
    pending: PendingApproval | None,
    approval: str,
    approver: str | None,
    reason_code: str | None = None,
    votes: tuple[str, ...] | None = None,
    approval_id: str | None = None,
) -> None:
    """Note what happened to an approval as the request line (:mod:`effectgate.shared.consumer.request_log`).

    Args:
        pending: the approval (``None``: an answer to an approval that could not be read).
        approval: ``requested``, ``voted``, ``withdrawn``, ``granted``, ``rejected``,
            ``expired``, ``refused`` (an answer that did not count) or ``not_open`` (an
            answer to an approval not opened yet).
        approver: who answered, if anyone.
        reason_code: why it was rejected or an answer refused.
        votes: the votes that count now (default: ``pending``'s).
        approval_id: the approval answered, when ``pending`` is ``None``.
    """
    fields: dict[str, object] = {"approval": approval, "approval_id": approval_id}
    if pending is not None:
        counted = pending.votes if votes is None else votes
        fields = {
            "request_id": pending.request_id,
            "principal": pending.principal,
            "tool": pending.request.tool,
            "operation": pending.request.operation,
            "approval": approval,
            "approval_id": pending.approval_id,
            "votes": f"{len(counted)}/{pending.approvals_required}",
            "requests": len(pending.request_ids) if len(pending.request_ids) > 1 else None,
        }
    note("approval", **fields, approver=approver, reason_code=reason_code)


@dataclass
class Announcer:
    """Signs and publishes the events of an approval's life.

    Attributes:
        key: the approvals signing key.
        publish: ``publish(subject, event)`` onto the stream.
        clock: current UTC time.
    """

    key: Ed25519PrivateKey
    publish: Publish
    clock: Callable[[], datetime]

    async def outcome(
        self, pending: PendingApproval, state: ApprovalState, approver: str | None, note: str, code: str = ""
    ) -> None:
        """Publish the grant or rejection of ``pending`` for every request it answers.

        Raises:
            Exception: a publish failed after :data:`PUBLISH_ATTEMPTS` (the requests then end by the backstop).
        """
        for request_id in pending.request_ids:
            event = self._outcome_event(pending, request_id, state, approver, note, code)
            kind = "granted" if isinstance(event, ApprovalGranted) else "rejected"
            await self._publish_retried(Subjects.approval(kind, pending.principal, request_id), event)
        reason_code = None if state is ApprovalState.GRANTED else (code or None)
        note_approval(pending, state.value, approver, reason_code)

    async def vote(self, pending: PendingApproval, approver: str, votes: tuple[str, ...], withdrawn: bool) -> None:
        """Publish one vote (or withdrawn vote) that leaves ``pending`` pending, with the votes that count now."""
        event = ApprovalVoted(
            event_id=f"voted:{pending.approval_id}:{uuid.uuid4().hex}",
            occurred_at=self.clock(),
            request_id=pending.request_id,
            principal=pending.principal,
            approval_id=pending.approval_id,
            request_hash=pending.request_hash,
            approver=approver,
            withdrawn=withdrawn,
            votes=votes,
            approvals_required=pending.approvals_required,
        )
        subject = Subjects.approval("voted", pending.principal, pending.request_id)
        await self._publish_retried(subject, sign_event(event, self.key))
        note_approval(pending, "withdrawn" if withdrawn else "voted", approver, votes=votes)

    def _outcome_event(
        self,
        pending: PendingApproval,
        request_id: str,
        state: ApprovalState,
        approver: str | None,
        note: str,
        code: str,
    ) -> ApprovalGranted | ApprovalRejected:
        common: dict[str, Any] = {
            "event_id": f"{state.value}:{pending.approval_id}:{uuid.uuid4().hex}",
            "occurred_at": self.clock(),
            "request_id": request_id,
            "principal": pending.principal,
            "approval_id": pending.approval_id,
        }
        if state is ApprovalState.GRANTED and approver:
            granted = ApprovalGranted(
                **common,
                request_hash=pending.request_hash,
                approver=approver,
                expires_at=pending.expires_at,
                approvers=pending.votes,
                contents=pending.contents,
            )
            return sign_event(granted, self.key)
        code = code or ("approval_expired" if state is ApprovalState.EXPIRED else "approval_rejected")
        reason = rejection_reason(code, approver, note, pending.principal)
        return sign_event(ApprovalRejected(**common, reason_code=code, reason=reason, approver=approver), self.key)

    async def _publish_retried(self, subject: str, event: Any) -> None:
        """Publish an answer the store already recorded, retrying it (the stream deduplicates its event id).

        The store will not let the approval be answered a second time, so the answer must get out.

        Raises:
            Exception: the last attempt's failure.
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
