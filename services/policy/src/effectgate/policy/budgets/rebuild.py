"""Rebuilding the spend ledger from the stream after Redis lost it.

The ledger is an index: every admitted call is in the stream. A call admitted at its decision
has an ``execute`` decision (not a replay), and its reservation was made for the window holding
the decision's own time (the decision's ``occurred_at`` is the admission's clock reading), so
it is restored exactly.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime

from effectgate.contracts.events import DecisionMade
from effectgate.contracts.tools.descriptors import DescriptorSource
from effectgate.contracts.vocabulary import Outcome, Verdict
from effectgate.policy.budgets.ledger import Charge, RecordState
from effectgate.policy.budgets.rules import CostUnknown, window_start
from effectgate.policy.pipeline.admission import Call, Spending, charges_for
from effectgate.policy.ports import RebuildableLedger, SpendTrail
from effectgate.shared.stores.rebuilding import UntilDone, rebuild

__all__ = ["BudgetRebuilder", "rebuild_budgets"]

log = logging.getLogger("effectgate.policy")


async def rebuild_budgets(
    spending: Spending,
    ledger: RebuildableLedger,
    trail: SpendTrail,
    descriptors: DescriptorSource,
    clock: Callable[[], datetime],
    owner: str,
) -> bool:
    """Rebuild the ledger if its epoch is missing; True when it is complete afterwards.

    Returns ``False`` when another instance holds the rebuild lock or it was lost (try again).

    Raises:
        BudgetUnavailable: Redis cannot be reached.
        nats.errors.Error: the stream cannot be read.
    """
    longest_s = max((b.window_s for b in spending.book.budgets), default=0) + spending.keep_s

    async def restore(decision: DecisionMade) -> int:
        now = clock()
        if (now - decision.occurred_at).total_seconds() > longest_s:  # every counter it was in is forgotten
            return 0
        return await _restore(decision, spending, ledger, trail, descriptors, now)

    decisions = trail.decisions() if spending.book.budgets else _nothing()
    return await rebuild(ledger, decisions, restore, owner, "spend ledger")


async def _nothing() -> AsyncIterator[DecisionMade]:
    """No budgets: nothing to restore (the epoch is still set)."""
    for _ in ():
        yield _


async def _restore(
    decision: DecisionMade,
    spending: Spending,
    ledger: RebuildableLedger,
    trail: SpendTrail,
    descriptors: DescriptorSource,
    now: datetime,
) -> int:
    """Write one admitted call back; 0 when it was not admitted, charged nothing, or ended released."""
    bound = decision.request
    span = None if bound is None else await _admitted_span(decision, trail, now)
    if span is None or bound is None:
        return 0
    receipt = await trail.receipt(decision.principal, decision.request_id)
    state = _state_of(receipt.outcome if receipt else None)
    if state is RecordState.UNCERTAIN:  # resolved since: ran is spent, not_run is released (not restored)
        state = _RESOLVED.get(await trail.settled(decision.principal, decision.request_id), state)
    descriptor = await descriptors.get(bound.tool, bound.version)
    if state is None or descriptor is None or bound.operation not in descriptor.operations:
        return 0
    call = Call(decision.principal, descriptor, bound.operation, bound.arguments, decision.request_id, span[0])
    try:
        charged = charges_for(call, spending)
    except CostUnknown:  # it was denied, so never charged
        return 0
    if charged is None:
        return 0
    last = min(span[1], receipt.occurred_at if receipt else now)
    charges = _kept(_spanning(charged[1], last, spending.keep_s), now)
    if not charges:
        return 0
    return int(await ledger.restore(decision.principal, decision.request_id, charged[0], charges, state))


async def _admitted_span(decision: DecisionMade, trail: SpendTrail, now: datetime) -> tuple[datetime, datetime] | None:
    """When the call was admitted: a moment (a direct call) or a span (a granted call); ``None``: never."""
    if decision.verdict is Verdict.EXECUTE and decision.reason_code != "idempotent_replay":
        return decision.occurred_at, decision.occurred_at
    if decision.verdict is not Verdict.NEEDS_APPROVAL:
        return None
    grant = await trail.grant(decision.principal, decision.request_id)
    return None if grant is None else (grant.occurred_at, max(grant.occurred_at, grant.expires_at))


_RESOLVED: dict[str | None, RecordState | None] = {"ran": RecordState.COMMITTED, "not_run": None}
"""The state an ``uncertain`` call's resolution restores it in."""


def _state_of(outcome: Outcome | None) -> RecordState | None:
    if outcome is None:
        return RecordState.RESERVED
    if outcome is Outcome.SUCCEEDED:
        return RecordState.COMMITTED
    return RecordState.UNCERTAIN if outcome is Outcome.UNCERTAIN else None


def _spanning(charges: tuple[Charge, ...], last: datetime, keep_s: int) -> tuple[Charge, ...]:
    """Each charge (in the window of the span's first moment) and its budget's later windows up to ``last``."""
    spread: list[Charge] = []
    for charge in charges:
        start, final_s = charge.start_s, window_start(last.timestamp(), charge.window_s)
        while start <= final_s or start == charge.start_s:
            expires_at_s = start + charge.window_s + keep_s
            spread.append(Charge(charge.budget, start, charge.window_s, charge.limit_units, expires_at_s))
            start += charge.window_s
    return tuple(spread)


def _kept(charges: tuple[Charge, ...], now: datetime) -> tuple[Charge, ...]:
    return tuple(charge for charge in charges if charge.expires_at_s > now.timestamp())


class BudgetRebuilder(UntilDone):
    """Runs :func:`rebuild_budgets` in the background, one at a time, until it succeeds."""

    def __init__(
        self,
        spending: Spending,
        ledger: RebuildableLedger,
        trail: SpendTrail,
        descriptors: DescriptorSource,
        clock: Callable[[], datetime],
    ) -> None:
        owner = uuid.uuid4().hex
        super().__init__(lambda: rebuild_budgets(spending, ledger, trail, descriptors, clock, owner), "spend ledger")
