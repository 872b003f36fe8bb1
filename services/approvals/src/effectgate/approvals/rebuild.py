"""Rebuilding pending approvals from the stream after Redis lost them.

The stream is the record: every opened approval is an ``ApprovalRequested`` event (a request
that joined an approval has one too, with that approval's id), every vote that did not complete
the quorum a signed ``ApprovalVoted`` carrying the votes that count, and every answer a grant
or rejection event (then a receipt).
"""

from __future__ import annotations

import logging
import uuid

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.approvals.domain import PendingApproval
from effectgate.approvals.ports import ApprovalsBus, ApprovalStore
from effectgate.contracts.approval_ids import approval_id_for
from effectgate.contracts.events import ApprovalRequested
from effectgate.contracts.integrity.signing import verify_event
from effectgate.shared.stores.rebuilding import UntilDone, rebuild

__all__ = ["Rebuilder", "rebuild_approvals"]

log = logging.getLogger("effectgate.approvals")


async def rebuild_approvals(store: ApprovalStore, bus: ApprovalsBus, owner: str, key: Ed25519PublicKey) -> bool:
    """Rebuild if the epoch is missing; True when the store is complete afterwards.

    Args:
        store: the approval store.
        bus: the stream.
        owner: this instance (holder of the rebuild lock).
        key: the approvals public key (a vote event counts only when it verifies).

    Raises:
        ApprovalsError: the store cannot be reached.
        nats.errors.Error: the stream cannot be read.
    """

    async def reopen(event: ApprovalRequested) -> int:
        return await _reopen(store, bus, event, key)

    return await rebuild(store, bus.requested(), reopen, owner, "approval store")


async def _reopen(store: ApprovalStore, bus: ApprovalsBus, event: ApprovalRequested, key: Ed25519PublicKey) -> int:
    """Re-open one requested approval (or re-attach a joined request) without answer or receipt; 1 when done."""
    if await bus.resolved(event.principal, event.request_id):
        return 0
    own_id = approval_id_for(event.principal, event.request_id)
    if event.approval_id != own_id:
        await store.restore_join(event.approval_id, event.request_id, own_id)
        return 1
    votes: tuple[str, ...] = ()
    async for voted in bus.voted(event.principal, event.request_id):
        if voted.approval_id == event.approval_id and verify_event(voted, key):
            votes = voted.votes
    await store.restore(_pending_of(event, votes))
    return 1


def _pending_of(event: ApprovalRequested, votes: tuple[str, ...]) -> PendingApproval:
    return PendingApproval(
        approval_id=event.approval_id,
        request_id=event.request_id,
        principal=event.principal,
        request_hash=event.request_hash,
        approver_role=event.approver_role,
        expires_at=event.expires_at,
        request=event.request,
        version_pinned=event.version_pinned,
        idempotency_key=event.idempotency_key,
        side_effect_class=event.side_effect_class,
        risk_tier=event.risk_tier,
        policy_id=event.policy_id,
        approvals_required=event.approvals_required,
        approvers=event.approvers,
        votes=votes,
        opened_at=event.occurred_at,
        contents=event.contents,
    )


class Rebuilder(UntilDone):
    """Runs :func:`rebuild_approvals` in the background, one at a time, until it succeeds."""

    def __init__(self, store: ApprovalStore, bus: ApprovalsBus, key: Ed25519PublicKey) -> None:
        owner = uuid.uuid4().hex
        super().__init__(lambda: rebuild_approvals(store, bus, owner, key), "approval store")
