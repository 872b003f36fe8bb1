"""The spend ledger: budget counters and each charged request's record, with an in-memory twin.

A call a budget applies to is *charged* when it is admitted: its cost (in units,
:mod:`toolgate.policy.budgets`) is reserved in the counter of every budget that applies,
for the window holding the moment of admission, all or nothing. The request's record
names those counters, so its receipt moves the same amount in each:

======================  ===========================================================
record state            counters
======================  ===========================================================
``reserved``            the cost is in ``reserved`` (admitted, no receipt yet)
``uncertain``           still in ``reserved`` (the receipt said ``uncertain``): until
                        an operator resolves it as run (commit) or not run (release)
``committed``           moved to ``used`` (``succeeded``, or resolved as run)
``released``            taken out of ``reserved`` (any other outcome, or not run)
``ended``               nothing: a receipt came for a request charged nowhere; a
                        later admission of it charges nothing (it will not run)
======================  ===========================================================

A call fits when ``used + reserved + cost <= limit`` in every counter. Each counter also
lists its records (request id to state and units), so a counter and the records it sums
are read together (:meth:`BudgetLedger.counters`), and the reconciliation check compares
both with the receipts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import msgspec

from toolgate.contracts.rpc.policy import BudgetCounter, Held
from toolgate.policy.errors import BudgetsLost

__all__ = [
    "BudgetCounter",
    "BudgetLedger",
    "Charge",
    "Exceeded",
    "Held",
    "InMemoryBudgetLedger",
    "RecordState",
    "counter_key",
    "record_key",
]


class RecordState(StrEnum):
    """Where one charged request stands (see the module's table)."""

    RESERVED = "reserved"
    UNCERTAIN = "uncertain"
    COMMITTED = "committed"
    RELEASED = "released"
    ENDED = "ended"


OPEN = (RecordState.RESERVED, RecordState.UNCERTAIN)
"""States whose units are in ``reserved``."""


@dataclass(frozen=True, slots=True)
class Charge:
    """One counter a request is charged in.

    Attributes:
        budget: the budget's name.
        start_s: the window's start, Unix seconds.
        window_s: the window's length, seconds.
        limit_units: the budget's limit, units.
        expires_at_s: when the counter (and its records) may be forgotten, Unix seconds.
    """

    budget: str
    start_s: int
    window_s: int
    limit_units: int
    expires_at_s: int


@dataclass(frozen=True, slots=True)
class Exceeded:
    """The call does not fit ``budget``: ``used + reserved + cost > limit``.

    Attributes:
        charge: the counter it does not fit in.
        used_units / reserved_units: the counter before this call.
    """

    charge: Charge
    used_units: int
    reserved_units: int


def counter_key(principal: str, budget: str, start_s: int) -> str:
    """``tg:budget:{<principal>}:c:<budget>:<window start>`` (hash tag: one Redis Cluster slot per principal)."""
    return f"tg:budget:{{{principal}}}:c:{budget}:{start_s}"


def record_key(principal: str, request_id: str) -> str:
    """``tg:budget:{<principal>}:r:<request id>``: the record of one charged request."""
    return f"tg:budget:{{{principal}}}:r:{request_id}"


class BudgetLedger(Protocol):
    """Budget counters and records (Redis: ``adapters.redis_budgets``).

    Every method that touches counters raises :class:`~toolgate.policy.errors.BudgetUnavailable`
    when the store cannot answer and :class:`~toolgate.policy.errors.BudgetsLost` when the
    ledger has no epoch marker (it lost its state and is rebuilt from the stream).
    """

    async def reserve(self, principal: str, request_id: str, units: int, charges: Sequence[Charge]) -> Exceeded | None:
        """Reserve ``units`` in every charge's counter, all or nothing; ``None`` when reserved.

        A request that has a record already (reserved before, or ended) is not charged again.
        """
        ...

    async def fits(self, principal: str, units: int, charges: Sequence[Charge]) -> Exceeded | None:
        """Whether ``units`` would fit every counter of ``charges`` now, writing nothing.

        Raises:
            BudgetUnavailable: the store cannot answer. BudgetsLost: the ledger was lost.
        """
        ...

    async def settle(
        self,
        principal: str,
        request_id: str,
        to: RecordState,
        *,
        only_from: RecordState | None = None,
        end: bool = True,
    ) -> RecordState | None:
        """Move the request's record to ``to`` (committed, released or uncertain) and its counters with it.

        Only a ``reserved`` or ``uncertain`` record moves (``only_from``: only from that
        state); anything else is left as it is, so a repeated settlement changes nothing.
        With ``end``, a request without a record gets an ``ended`` one (its receipt came
        first: a late admission of it charges nothing).

        Returns:
            The state the record was in (``None``: there was none).
        """
        ...

    async def counters(self, cursor: int, count: int) -> tuple[list[BudgetCounter], int]:
        """One page of counters (about ``count``) and the cursor of the next (0: the last page)."""
        ...

    async def restore(
        self, principal: str, request_id: str, units: int, charges: Sequence[Charge], state: RecordState
    ) -> bool:
        """Write back one request read from the stream (no limit check); False when it has a record."""
        ...


class InMemoryBudgetLedger:
    """:class:`BudgetLedger` in process memory (tests, single process); no expiry."""

    def __init__(self) -> None:
        self.epoch = True
        self.records: dict[tuple[str, str], tuple[RecordState, int, tuple[str, ...]]] = {}
        self.counters_by_key: dict[str, BudgetCounter] = {}

    def _check(self) -> None:
        if not self.epoch:
            raise BudgetsLost()

    async def reserve(self, principal: str, request_id: str, units: int, charges: Sequence[Charge]) -> Exceeded | None:
        """See :meth:`BudgetLedger.reserve`."""
        self._check()
        if (principal, request_id) in self.records:
            return None
        if (over := await self.fits(principal, units, charges)) is not None:
            return over
        await self.restore(principal, request_id, units, charges, RecordState.RESERVED)
        return None

    async def fits(self, principal: str, units: int, charges: Sequence[Charge]) -> Exceeded | None:
        """See :meth:`BudgetLedger.fits`."""
        self._check()
        for charge in charges:
            held = self._counter(principal, charge)
            if held.used_units + held.reserved_units + units > charge.limit_units:
                return Exceeded(charge, held.used_units, held.reserved_units)
        return None

    async def settle(
        self,
        principal: str,
        request_id: str,
        to: RecordState,
        *,
        only_from: RecordState | None = None,
        end: bool = True,
    ) -> RecordState | None:
        """See :meth:`BudgetLedger.settle`."""
        self._check()
        found = self.records.get((principal, request_id))
        if found is None:
            if end:
                self.records[(principal, request_id)] = (RecordState.ENDED, 0, ())
            return None
        state, units, keys = found
        if state not in OPEN or state is to or (only_from is not None and state is not only_from):
            return state
        self.records[(principal, request_id)] = (to, units, keys)
        for key in keys:
            self._move(key, request_id, state, to, units)
        return state

    async def counters(self, cursor: int, count: int) -> tuple[list[BudgetCounter], int]:
        """See :meth:`BudgetLedger.counters`: every counter in one page."""
        self._check()
        return list(self.counters_by_key.values()), 0

    async def restore(
        self, principal: str, request_id: str, units: int, charges: Sequence[Charge], state: RecordState
    ) -> bool:
        """See :meth:`BudgetLedger.restore`."""
        if (principal, request_id) in self.records:
            return False
        keys = tuple(counter_key(principal, charge.budget, charge.start_s) for charge in charges)
        self.records[(principal, request_id)] = (state, units, keys)
        for charge, key in zip(charges, keys, strict=True):
            held = self._counter(principal, charge)
            self.counters_by_key[key] = held
            self._move(key, request_id, None, state, units)
        return True

    def _counter(self, principal: str, charge: Charge) -> BudgetCounter:
        key = counter_key(principal, charge.budget, charge.start_s)
        held = self.counters_by_key.get(key)
        if held is None:
            held = BudgetCounter(
                principal=principal,
                budget=charge.budget,
                start_s=charge.start_s,
                window_s=charge.window_s,
                limit_units=charge.limit_units,
                used_units=0,
                reserved_units=0,
                records={},
            )
        return held

    def _move(self, key: str, request_id: str, was: RecordState | None, to: RecordState, units: int) -> None:
        held = self.counters_by_key[key]
        used = held.used_units + (units if to is RecordState.COMMITTED else 0)
        reserved = held.reserved_units - (units if was in OPEN else 0) + (units if to in OPEN else 0)
        records = {**held.records, request_id: Held(to.value, units)}
        self.counters_by_key[key] = msgspec.structs.replace(
            held, used_units=used, reserved_units=reserved, records=records
        )
