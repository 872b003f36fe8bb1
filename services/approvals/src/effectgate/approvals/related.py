"""Related approvals: the other approvals of the same request hash, so nobody grants a second effect.

An approver sees, on every approval, the others opened for exactly the same call (same
principal, tool, version, descriptor, operation and arguments): their state, whether they were
sent under the same idempotency key (approving both runs the effect once) or another one
(approving both runs it twice), and the receipt of each one whose request ended.
"""

from __future__ import annotations

from effectgate.approvals.domain import PendingApproval
from effectgate.approvals.ports import ApprovalsBus, ApprovalStore
from effectgate.contracts.events import Related

__all__ = ["MAX_RELATED", "related_to"]

MAX_RELATED = 20
"""Most related approvals named on one approval (the latest ones)."""


async def related_to(pending: PendingApproval, store: ApprovalStore, bus: ApprovalsBus) -> tuple[Related, ...]:
    """The other approvals of ``pending``'s request hash, soonest expiry first, at most :data:`MAX_RELATED`.

    Raises:
        ApprovalsError: the store cannot be read.
    """
    same = await store.same_request(pending.request_hash)
    others = [other for other in same if other.approval_id != pending.approval_id]
    latest = sorted(others, key=lambda other: other.expires_at)[-MAX_RELATED:]
    return tuple([await _related(other, pending, bus) for other in latest])


async def _related(other: PendingApproval, pending: PendingApproval, bus: ApprovalsBus) -> Related:
    receipt = await bus.receipt(other.principal, other.request_id)
    return Related(
        approval_id=other.approval_id,
        request_id=other.request_id,
        state=other.state.value,
        same_key=other.idempotency_key is not None and other.idempotency_key == pending.idempotency_key,
        receipt_id=receipt.receipt_id if receipt else None,
        outcome=receipt.outcome if receipt else None,
    )
