"""In-memory twins of the policy's ports (:mod:`effectgate.policy.ports`), for tests and single-process use.

:class:`InMemoryRateLimiter` implements the GCRA arithmetic of :mod:`effectgate.policy.domain`
as ``adapters.redis_limiter.RedisRateLimiter`` does, in integer microseconds.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from effectgate.contracts.events import ApprovalGranted, DecisionMade, ReceiptIssued, UncertainResolved
from effectgate.contracts.rpc.policy import BudgetCounter, Held
from effectgate.contracts.tools.descriptors import RateLimit, ToolDescriptor, semver_key
from effectgate.policy.budgets.ledger import OPEN, Charge, Exceeded, RecordState, counter_key
from effectgate.policy.domain import LimitDecision, admitted_key, gcra_parameters, limiter_key, no_calls, retry_after_s
from effectgate.policy.errors import BudgetsLost
from effectgate.policy.ports import ReplayState
from effectgate.shared.stores.policy_kv import CurrentEntry, PolicyConflict, PublishedPolicy

__all__ = [
    "InMemoryBudgetLedger",
    "InMemoryDescriptorSource",
    "InMemoryPolicyStore",
    "InMemoryRateLimiter",
    "InMemoryReplayIndex",
    "InMemorySpendTrail",
]


class InMemoryDescriptorSource:
    """A ``DescriptorSource`` (``contracts.tools.descriptors``) over a fixed list; "latest" is the highest SemVer."""

    def __init__(self, descriptors: list[ToolDescriptor]) -> None:
        self._descriptors = {(d.name, d.version): d for d in descriptors}

    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        """Return ``tool`` at ``version`` (``None``: latest), or None."""
        if version is not None:
            return self._descriptors.get((tool, version))
        versions = [d for (name, _), d in self._descriptors.items() if name == tool]
        return max(versions, key=lambda d: semver_key(d.version), default=None)

    async def list(self) -> list[ToolDescriptor]:
        """Return the latest version of every tool, sorted by name."""
        latest = [await self.get(name) for name in sorted({name for name, _ in self._descriptors})]
        return [d for d in latest if d is not None]


class InMemoryReplayIndex:
    """:class:`~effectgate.policy.ports.ReplayIndex` over a mapping ``(principal, idempotency_key) -> ReplayState``."""

    def __init__(self, states: Mapping[tuple[str, str], ReplayState] | None = None) -> None:
        self.states: dict[tuple[str, str], ReplayState] = dict(states or {})

    async def lookup(self, principal: str, idempotency_key: str) -> ReplayState | None:
        """Return the key's state, or None."""
        return self.states.get((principal, idempotency_key))


class InMemoryRateLimiter:
    """GCRA in process memory, for tests and single-process use.

    Args:
        clock: monotonic clock in seconds (default :func:`time.monotonic`).
        admitted_ttl_s: how long an admitted request id is remembered, seconds.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, admitted_ttl_s: float = 3600.0) -> None:
        self._clock, self._admitted_ttl_us = clock, round(admitted_ttl_s * 1_000_000)
        self._tat_us: dict[str, int] = {}
        self._admitted_until_us: dict[str, int] = {}

    async def admit(self, principal: str, bucket: str, rate: RateLimit, request_id: str) -> LimitDecision:
        """See :meth:`~effectgate.policy.ports.RateLimiter.admit`; never raises."""
        parameters = gcra_parameters(rate)
        if parameters is None:
            return no_calls(rate)
        emission_us, burst = parameters
        key, now_us = limiter_key(principal, bucket), round(self._clock() * 1_000_000)
        tolerance_us, tat_us = emission_us * burst, max(self._tat_us.get(key, now_us), now_us)
        if self._admitted_until_us.get(admitted_key(principal, request_id), 0) > now_us:
            return LimitDecision(True, max(0, (tolerance_us - (tat_us - now_us)) // emission_us), 0.0)
        new_tat_us = tat_us + emission_us
        if new_tat_us - tolerance_us > now_us:
            return LimitDecision(False, 0, retry_after_s(new_tat_us - tolerance_us - now_us))
        self._tat_us[key] = new_tat_us
        self._admitted_until_us[admitted_key(principal, request_id)] = now_us + self._admitted_ttl_us
        return LimitDecision(True, (tolerance_us - (new_tat_us - now_us)) // emission_us, 0.0)


class InMemoryPolicyStore:
    """:class:`~effectgate.policy.ports.PolicyStore` in process memory (revisions count up from 1)."""

    def __init__(self) -> None:
        self.entry = CurrentEntry(None, None)
        self.versions: dict[str, PublishedPolicy] = {}
        self.file: str | None = None
        self._revision = 0

    async def current(self) -> CurrentEntry:
        """See :meth:`~effectgate.policy.ports.PolicyStore.current`."""
        return self.entry

    async def version(self, version: str) -> PublishedPolicy | None:
        """See :meth:`~effectgate.policy.ports.PolicyStore.version`."""
        return self.versions.get(version)

    async def file_version(self) -> str | None:
        """See :meth:`~effectgate.policy.ports.PolicyStore.file_version`."""
        return self.file

    async def replace_current(self, policy: PublishedPolicy, revision: int | None) -> int:
        """See :meth:`~effectgate.policy.ports.PolicyStore.replace_current`."""
        self.versions.setdefault(policy.version, policy)
        if revision != self.entry.revision:
            raise PolicyConflict(f"current is at revision {self.entry.revision}, not {revision}")
        self._revision += 1
        self.entry = CurrentEntry(policy, self._revision)
        return self._revision

    async def mark_file(self, version: str) -> None:
        """See :meth:`~effectgate.policy.ports.PolicyStore.mark_file`."""
        self.file = version


class InMemoryBudgetLedger:
    """:class:`~effectgate.policy.ports.BudgetLedger` in process memory (tests, single process); no expiry."""

    def __init__(self) -> None:
        self.epoch = True
        self.records: dict[tuple[str, str], tuple[RecordState, int, tuple[str, ...]]] = {}
        self.counters_by_key: dict[str, BudgetCounter] = {}

    def _check(self) -> None:
        if not self.epoch:
            raise BudgetsLost()

    async def reserve(self, principal: str, request_id: str, units: int, charges: Sequence[Charge]) -> Exceeded | None:
        """See :meth:`~effectgate.policy.ports.BudgetLedger.reserve`."""
        self._check()
        if (principal, request_id) in self.records:
            return None
        if (over := await self.fits(principal, units, charges)) is not None:
            return over
        await self.restore(principal, request_id, units, charges, RecordState.RESERVED)
        return None

    async def fits(self, principal: str, units: int, charges: Sequence[Charge]) -> Exceeded | None:
        """See :meth:`~effectgate.policy.ports.BudgetLedger.fits`."""
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
        """See :meth:`~effectgate.policy.ports.BudgetLedger.settle`."""
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
        """See :meth:`~effectgate.policy.ports.BudgetLedger.counters`: every counter in one page."""
        self._check()
        return list(self.counters_by_key.values()), 0

    async def restore(
        self, principal: str, request_id: str, units: int, charges: Sequence[Charge], state: RecordState
    ) -> bool:
        """See :meth:`~effectgate.policy.ports.BudgetLedger.restore`."""
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


@dataclass
class InMemorySpendTrail:
    """:class:`~effectgate.policy.ports.SpendTrail` over lists of events (taken as verified)."""

    decided: list[DecisionMade] = field(default_factory=list)
    grants: list[ApprovalGranted] = field(default_factory=list)
    receipts: list[ReceiptIssued] = field(default_factory=list)
    resolutions: list[UncertainResolved] = field(default_factory=list)

    async def decisions(self) -> AsyncIterator[DecisionMade]:
        """Every decision, in list order."""
        for decision in self.decided:
            yield decision

    async def grant(self, principal: str, request_id: str) -> ApprovalGranted | None:
        """The first grant of the request."""
        return next((g for g in self.grants if (g.principal, g.request_id) == (principal, request_id)), None)

    async def receipt(self, principal: str, request_id: str) -> ReceiptIssued | None:
        """The first receipt of the request."""
        return next((r for r in self.receipts if (r.principal, r.request_id) == (principal, request_id)), None)

    async def settled(self, principal: str, request_id: str) -> str | None:
        """The last ``ran`` / ``not_run`` resolution of the request."""
        found = [r.resolution for r in self.resolutions if (r.principal, r.request_id) == (principal, request_id)]
        return next((r for r in reversed(found) if r != "unknown"), None)
