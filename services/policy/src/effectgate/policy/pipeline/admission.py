"""Admission: the moment a call's rate budget and spend budgets are taken (once per request)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from effectgate.contracts.tools.descriptors import ToolDescriptor, rate_of
from effectgate.policy.budgets.ledger import Charge, Exceeded
from effectgate.policy.budgets.rules import BudgetBook, CostUnknown, as_cost, cost_units, window_start
from effectgate.policy.domain import LimitDecision
from effectgate.policy.errors import PolicyError
from effectgate.policy.ports import BudgetLedger, RateLimiter

__all__ = ["Call", "NotAdmitted", "Spending", "admit", "admit_rated", "charges_for", "room_for"]


@dataclass(frozen=True, slots=True)
class NotAdmitted:
    """Why a call was not admitted.

    Attributes:
        reason_code: ``rate_limited``, ``rate_limiter_unavailable``, ``budget_exceeded``,
            ``budget_cost_unknown`` or ``budget_unavailable`` (the last three fail closed).
        reason: human text naming the rate or budget and when to retry.
        retry_after_s: for ``rate_limited`` and ``budget_exceeded``, seconds until the call
            could fit.
    """

    reason_code: str
    reason: str
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class Call:
    """One call at its admission.

    Attributes:
        principal: who calls. descriptor / operation: what. arguments: with what.
        request_id: the request admitted (admission is once per request id).
        at: the moment of admission (the decision's time, or the re-check's), UTC.
    """

    principal: str
    descriptor: ToolDescriptor
    operation: str
    arguments: Mapping[str, Any]
    request_id: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Spending:
    """The spend budgets in force and their ledger.

    Attributes:
        book: the budgets of the budgets file.
        ledger: the counters.
        keep_s: how long a counter is kept after its window ends, seconds.
    """

    book: BudgetBook
    ledger: BudgetLedger
    keep_s: int = 604_800


async def admit(call: Call, limiter: RateLimiter, spending: Spending | None) -> NotAdmitted | None:
    """Take one call of the rate and reserve its cost, unless ``call.request_id`` was admitted before.

    ``spending`` is ``None`` for a replay (the rate only).

    Returns:
        ``None`` when admitted, else why not; never raises for a store fault (that is a
        :class:`NotAdmitted` ``rate_limiter_unavailable`` or ``budget_unavailable``: fail closed).
    """
    bucket, rate = rate_of(call.descriptor, call.operation)
    try:
        decision = await limiter.admit(call.principal, bucket, rate, call.request_id)
    except PolicyError as error:
        return NotAdmitted(error.reason_code, error.reason)
    return await admit_rated(call, decision, spending)


async def admit_rated(call: Call, decision: LimitDecision, spending: Spending | None) -> NotAdmitted | None:
    """:func:`admit` once the rate answered ``decision`` (taken with the replay lookup: the pipeline's gate).

    Returns:
        ``rate_limited`` when the rate refused; else the spend reservation's answer.
    """
    if not decision.allowed:
        bucket, rate = rate_of(call.descriptor, call.operation)
        budget = f"{rate.calls} calls per {rate.period_s:g}s"
        reason = f"rate limit of {bucket} reached ({budget}); retry after {decision.retry_after_s:.3f}s"
        return NotAdmitted("rate_limited", reason, decision.retry_after_s)
    return None if spending is None else await _reserve(call, spending)


def charges_for(call: Call, spending: Spending) -> tuple[int, tuple[Charge, ...]] | None:
    """The call's cost in units and the counters it is charged in; ``None`` when nothing is charged.

    Raises:
        CostUnknown: a budget applies and the cost cannot be known exactly.
    """
    applying = spending.book.applying(call.principal, call.descriptor.name, call.operation)
    if not applying:
        return None
    units = cost_units(call.descriptor.operations[call.operation], call.arguments)
    if not units:
        return None
    at_s = call.at.timestamp()
    charges = tuple(
        _charge(b.name, window_start(at_s, b.window_s), b.window_s, b.limit_units, spending) for b in applying
    )
    return units, charges


def _charge(name: str, start_s: int, window_s: int, limit_units: int, spending: Spending) -> Charge:
    return Charge(name, start_s, window_s, limit_units, start_s + window_s + spending.keep_s)


async def room_for(call: Call, spending: Spending | None) -> NotAdmitted | None:
    """Whether the call's cost fits its budgets *now*, reserving nothing (a call sent to approval).

    An approval for a call its budgets could not admit would be asked for nothing: such a
    call is denied at once. Room can still run out before the grant runs; its admission
    at the re-check decides.
    """
    return None if spending is None else await _take(call, spending, reserve=False)


async def _reserve(call: Call, spending: Spending) -> NotAdmitted | None:
    return await _take(call, spending, reserve=True)


async def _take(call: Call, spending: Spending, *, reserve: bool) -> NotAdmitted | None:
    try:
        charged = charges_for(call, spending)
    except CostUnknown as error:
        return NotAdmitted("budget_cost_unknown", f"the cost of {call.descriptor.name}.{call.operation}: {error.why}")
    if charged is None:
        return None
    units, charges = charged
    ledger = spending.ledger
    try:
        if reserve:
            exceeded = await ledger.reserve(call.principal, call.request_id, units, charges)
        else:
            exceeded = await ledger.fits(call.principal, units, charges)
    except PolicyError as error:
        return NotAdmitted(error.reason_code, error.reason)
    return None if exceeded is None else _over(call, units, exceeded)


def _over(call: Call, units: int, over: Exceeded) -> NotAdmitted:
    charge = over.charge
    retry_after_s = max(0.0, charge.start_s + charge.window_s - call.at.timestamp())
    reason = (
        f"budget {charge.budget} of {call.principal} exceeded: {as_cost(over.used_units)} used and "
        f"{as_cost(over.reserved_units)} reserved of {as_cost(charge.limit_units)} in its {charge.window_s}s "
        f"window; this call costs {as_cost(units)}; the window resets in {retry_after_s:.0f}s"
    )
    return NotAdmitted("budget_exceeded", reason, retry_after_s)
