"""What every part of the approvals workflow shares: its ports, keys and clock, and how it refuses an answer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from effectgate.approvals.announcer import Announcer, Publish, note_approval
from effectgate.approvals.domain import DecideReply, PendingApproval
from effectgate.approvals.early import EarlyAnswers
from effectgate.approvals.errors import ApprovalsError, DecideRefused
from effectgate.approvals.ports import ApprovalsBus, ApprovalStore
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.errors import IndexLost
from effectgate.contracts.security import SecurityKind
from effectgate.shared.runtime.reporting import SecurityReporter

__all__ = ["Workflow", "refusal_reply"]

log = logging.getLogger("effectgate.approvals")


@dataclass
class Workflow:
    """The ports, keys and clock of the approvals workflow (:class:`Approvals` adds its steps).

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

    async def after(self, pending: PendingApproval) -> PendingApproval:
        """``pending`` as the store holds it after an answer (every request that joined it); as given if unreadable."""
        try:
            return await self.store.get(pending.approval_id) or pending
        except (ApprovalsError, IndexLost):
            log.warning("%s could not be read back: answering the requests known before", pending.approval_id)
            return pending

    def _answered_meanwhile(self, pending: PendingApproval, approver: str) -> DecideReply:
        answered = DecideRefused("not_pending", f"{pending.approval_id} was answered already")
        return self.refusal(approver, answered, pending.approval_id, pending)

    def refusal(
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
        return refusal_reply(refused.reason_code, refused.reason)


def refusal_reply(code: str, reason: str) -> DecideReply:
    """The refusal ``code`` with its ``reason``, as the approver is answered."""
    return DecideReply(ok=False, reason_code=code, reason=reason)
