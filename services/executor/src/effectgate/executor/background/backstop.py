"""The backstop: every request ends, whatever broke (guarantee 2, docs/explanation/architecture.md).

A durable consumer (``executor-backstop``) holds every tool request until it has a receipt. A
request younger than ``undecided_s`` is only scheduled (no read at all); after that the
backstop reads its receipt, decision and approval events and computes the request's last
deadline (:func:`deadline`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from effectgate.contracts.events import ApprovalGranted, DecisionMade, request_hash
from effectgate.contracts.integrity.signing import verify_event
from effectgate.contracts.vocabulary import Verdict
from effectgate.executor.domain import undecided_receipt
from effectgate.executor.effects.timing import Timing
from effectgate.executor.ports import ApprovalTrail, IdempotencyStore, Outlet
from effectgate.executor.service import Executor
from effectgate.executor.verification import Keys
from effectgate.shared.consumer.acks import Later, Settle, Settlement

__all__ = ["Backstop", "Deadlines", "deadline"]

log = logging.getLogger("effectgate.executor")


@dataclass(frozen=True)
class Deadlines:
    """The backstop's durations, seconds.

    Attributes:
        undecided_s: a request with no decision after this long is ended (nothing ran).
        margin_s: slack after each stage's own deadline before the backstop steps in.
        max_check_interval_s: longest pause between two looks at one request.
    """

    undecided_s: float = 300.0
    margin_s: float = 60.0
    max_check_interval_s: float = 300.0


def deadline(
    stored_at: datetime, decision: DecisionMade | None, trail: ApprovalTrail, timing: Timing, limits: Deadlines
) -> datetime:
    """When a request has outlived every stage's deadline (pure).

    No decision: ``stored_at + undecided_s``. Deny/refuse: decision + margin. Execute:
    decision + tool timeout + stale grace + margin. Needs approval: after a grant, the
    grant + timeout + grace + margin; after a rejection, it + margin; while pending, the
    approval's expiry + margin (or the decision's maximum age when no approval was opened).
    """
    margin = timedelta(seconds=limits.margin_s)
    if decision is None:
        return stored_at + timedelta(seconds=limits.undecided_s)
    run = timedelta(seconds=(decision.timeout_s or 30.0) + timing.stale_grace_s) + margin
    if decision.verdict is Verdict.EXECUTE:
        return decision.occurred_at + run
    if decision.verdict is not Verdict.NEEDS_APPROVAL:
        return decision.occurred_at + margin
    if trail.granted:
        return trail.granted[0].occurred_at + run
    if trail.rejected:
        return trail.rejected[0].occurred_at + margin
    if trail.requested is not None:
        return trail.requested.expires_at + margin
    return decision.occurred_at + timedelta(seconds=timing.decision_max_age_s) + margin


@dataclass
class Backstop:
    """Ends requests that outlived their deadlines."""

    executor: Executor
    bus: Outlet
    store: IdempotencyStore
    keys: Keys
    clock: Callable[[], datetime]
    timing: Timing
    limits: Deadlines

    def not_yet(self, stored_at: datetime) -> Later | None:
        """When to look at a request stored at ``stored_at`` that is younger than ``undecided_s``; else ``None``."""
        age_s = (self.clock() - stored_at).total_seconds()
        return Later(self.limits.undecided_s - age_s) if age_s < self.limits.undecided_s else None

    async def check(self, principal: str, request_id: str, stored_at: datetime) -> Settlement:
        """Look at one request; end it if it outlived every deadline, else say when to look again.

        Raises:
            IdempotencyStoreUnavailable / IndexLost: the index cannot answer (look again later).
        """
        if (young := self.not_yet(stored_at)) is not None:
            return young
        if await self.bus.receipt(principal, request_id) is not None:
            return Settle.ACK
        decision = await self._decision(principal, request_id)
        trail = await self._trail(decision)
        remaining_s = (deadline(stored_at, decision, trail, self.timing, self.limits) - self.clock()).total_seconds()
        if remaining_s > 0:
            return Later(min(remaining_s, self.limits.max_check_interval_s))
        settle = await self._end(principal, request_id, decision, trail)
        if settle is Settle.ACK:
            log.error("ALARM backstop: %s/%s outlived its deadlines without a receipt; ended it", principal, request_id)
        return settle

    async def _decision(self, principal: str, request_id: str) -> DecisionMade | None:
        decision = await self.bus.decision(principal, request_id)
        return decision if decision is not None and verify_event(decision, self.keys.policy) else None

    async def _trail(self, decision: DecisionMade | None) -> ApprovalTrail:
        if decision is None or decision.verdict is not Verdict.NEEDS_APPROVAL:
            return ApprovalTrail()
        trail = await self.bus.approvals(decision.principal, decision.request_id)
        granted = tuple(g for g in trail.granted if self._binds(g, decision))
        rejected = tuple(r for r in trail.rejected if verify_event(r, self.keys.approvals))
        return ApprovalTrail(requested=trail.requested, granted=granted, rejected=rejected)

    def _binds(self, grant: ApprovalGranted, decision: DecisionMade) -> bool:
        bound = decision.request
        return (
            bound is not None and grant.request_hash == request_hash(bound) and verify_event(grant, self.keys.approvals)
        )

    async def _end(
        self, principal: str, request_id: str, decision: DecisionMade | None, trail: ApprovalTrail
    ) -> Settlement:
        if decision is None:
            return await self._end_undecided(principal, request_id)
        if decision.verdict in (Verdict.DENY, Verdict.REFUSE):
            return await self.executor.on_decision(decision)
        if trail.rejected:
            return await self.executor.on_rejected(trail.rejected[0])
        grant = trail.granted[0] if trail.granted else None
        return await self.executor.end(decision, grant, self._opened(trail))

    def _opened(self, trail: ApprovalTrail) -> str | None:
        """The id of the approval the request waited on, when its opening is signed by the approvals key."""
        requested = trail.requested
        return requested.approval_id if requested is not None and verify_event(requested, self.keys.approvals) else None

    async def _end_undecided(self, principal: str, request_id: str) -> Settlement:
        if not await self.store.end_request(principal, request_id, self.timing.idempotency_ttl_s):
            return Later(self.limits.margin_s)  # a run started meanwhile: its decision is on its way
        reason = f"backstop: no decision within {self.limits.undecided_s:g}s; nothing ran"
        await self.bus.publish_receipt(undecided_receipt(principal, request_id, self.clock(), reason))
        return Settle.ACK
