"""Do the budget counters agree with what really ran? The check, and the operator's two requests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from effectgate.contracts.rpc.policy import CountersQuery, CountersReply, ResolveQuery, ResolveReply
from effectgate.contracts.vocabulary import Outcome
from effectgate.policy.budgets.ledger import BudgetCounter, RecordState

__all__ = [
    "CountersQuery",
    "CountersReply",
    "Difference",
    "ResolveQuery",
    "ResolveReply",
    "differences",
    "pending",
    "receipt_outcomes",
]

MAX_PAGE = 500
"""Most counters one ``tg.policy.budgets`` answer asks Redis for."""


class Difference(msgspec.Struct, frozen=True, kw_only=True):
    """One disagreement between the ledger and the receipts (kinds in the module docstring)."""

    kind: str
    principal: str
    budget: str
    start_s: int
    request_id: str | None
    detail: str


def receipt_outcomes(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """``(principal, request id) → outcome`` of each request's first receipt in audit records.

    Args:
        records: audit records as exported (``event_type``, ``payload``: the event's JSON text).
    """
    found: dict[tuple[str, str], str] = {}
    for record in records:
        if record.get("event_type") != "receipt.issued":
            continue
        try:
            body = msgspec.json.decode(str(record.get("payload") or ""))
        except msgspec.DecodeError:
            continue
        if isinstance(body, dict) and all(isinstance(body.get(k), str) for k in ("principal", "request_id", "outcome")):
            found.setdefault((body["principal"], body["request_id"]), body["outcome"])
    return found


def differences(counters: Iterable[BudgetCounter], receipts: Mapping[tuple[str, str], str]) -> list[Difference]:
    """Every difference between ``counters`` and the ``receipts`` (:func:`receipt_outcomes`)."""
    found: list[Difference] = []
    for counter in counters:
        found += _sums(counter)
        for request_id, held in sorted(counter.records.items()):
            problem = _problem(held.state, receipts.get((counter.principal, request_id)))
            if problem is not None:
                found.append(_difference(counter, request_id, *problem))
    return found


def pending(counters: Iterable[BudgetCounter], receipts: Mapping[tuple[str, str], str]) -> list[Difference]:
    """Reservations of calls still running (``in_flight``) and ``awaiting_resolution`` (uncertain)."""
    found: list[Difference] = []
    for counter in counters:
        for request_id, held in sorted(counter.records.items()):
            outcome = receipts.get((counter.principal, request_id))
            if held.state == RecordState.RESERVED and outcome is None:
                found.append(_difference(counter, request_id, "in_flight", f"{held.units} units reserved, no receipt"))
            if held.state == RecordState.UNCERTAIN and outcome == Outcome.UNCERTAIN:
                detail = f"{held.units} units held: `effectgate budgets resolve` once known"
                found.append(_difference(counter, request_id, "awaiting_resolution", detail))
    return found


def _difference(counter: BudgetCounter, request_id: str | None, kind: str, detail: str) -> Difference:
    return Difference(
        kind=kind,
        principal=counter.principal,
        budget=counter.budget,
        start_s=counter.start_s,
        request_id=request_id,
        detail=detail,
    )


def _sums(counter: BudgetCounter) -> list[Difference]:
    held = counter.records.values()
    used = sum(h.units for h in held if h.state == RecordState.COMMITTED)
    reserved = sum(h.units for h in held if h.state in (RecordState.RESERVED, RecordState.UNCERTAIN))
    if (used, reserved) == (counter.used_units, counter.reserved_units):
        return []
    detail = (
        f"counter says used {counter.used_units}, reserved {counter.reserved_units} units; "
        f"its records sum to used {used}, reserved {reserved}"
    )
    return [_difference(counter, None, "counter_mismatch", detail)]


def _problem(state: str, outcome: str | None) -> tuple[str, str] | None:
    """The difference one record makes with its request's receipt outcome, or ``None``."""
    said = f"receipt {outcome}" if outcome else "no receipt"
    if state == RecordState.COMMITTED and outcome not in (Outcome.SUCCEEDED, Outcome.UNCERTAIN):
        return "committed_without_success", f"committed, but {said}"
    if state in (RecordState.RELEASED, RecordState.UNCERTAIN) and outcome == Outcome.SUCCEEDED:
        return "success_not_committed", f"{state}, but receipt succeeded"
    if state == RecordState.RESERVED and outcome is not None:
        return "receipt_not_applied", f"still reserved, but {said}"
    if state == RecordState.UNCERTAIN and outcome not in (Outcome.UNCERTAIN, Outcome.SUCCEEDED):
        return "uncertain_mismatch", f"marked uncertain, but {said}"
    if state == RecordState.RELEASED and outcome is None:
        return "released_without_receipt", "released, but no receipt"
    return None
