"""Ports of the policy service: the Protocols its workflow reaches the world through."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from effectgate.contracts.events import ApprovalGranted, DecisionMade, ReceiptIssued
from effectgate.contracts.rpc.policy import BudgetCounter
from effectgate.contracts.tools.descriptors import RateLimit
from effectgate.contracts.tools.tool_states import ToolState
from effectgate.policy.budgets.ledger import Charge, Exceeded, RecordState
from effectgate.policy.domain import LimitDecision
from effectgate.shared.stores.policy_kv import CurrentEntry, PublishedPolicy
from effectgate.shared.stores.rebuilding import Rebuildable

__all__ = [
    "AdmitAsk",
    "BudgetLedger",
    "PolicyStore",
    "RateLimiter",
    "RebuildableLedger",
    "ReplayGate",
    "ReplayIndex",
    "ReplayState",
    "Screened",
    "SpendTrail",
    "StoreRoom",
    "ToolStates",
]


class ToolStates(Protocol):
    """Reads the tools' recorded states (:mod:`effectgate.contracts.tools.tool_states`)."""

    async def state(self, tool: str) -> ToolState | None:
        """Return the recorded state of ``tool``, or None when none was recorded."""
        ...


class StoreRoom(Protocol):
    """Whether the record has room for a new request's decision and receipt (``shared.stores.record_usage``)."""

    async def full(self, size_bytes: int = 0) -> str | None:
        """Why no new request of ``size_bytes`` may be admitted now (nearly full, usage unknown); ``None``: room."""
        ...


@dataclass(frozen=True, slots=True)
class ReplayState:
    """What the idempotency store holds for one ``(principal, idempotency key)``.

    Attributes:
        done: a receipt was stored (the call completed); False while in flight.
        fingerprint: the request hash (``sha256:<hex>``) the key was first used with.
    """

    done: bool
    fingerprint: str


class ReplayIndex(Protocol):
    """Reads the executor's idempotency records (never writes them)."""

    async def lookup(self, principal: str, idempotency_key: str) -> ReplayState | None:
        """Return the key's state, or None when the key was never used.

        Raises:
            PolicyError: the store cannot answer; the caller denies (fail closed).
        """
        ...


class RateLimiter(Protocol):
    """Counts admitted calls per ``(principal, bucket)`` (bucket: ``descriptors.rate_of``)."""

    async def admit(self, principal: str, bucket: str, rate: RateLimit, request_id: str) -> LimitDecision:
        """Admit request ``request_id`` of ``principal`` if one more call fits ``rate``.

        Exactly once per ``(principal, request_id)``: a request admitted before is
        allowed again without being counted; a limited one leaves nothing behind.

        Raises:
            LimiterUnavailable: the limiter's store failed or timed out; the caller
                denies the request (fail closed).
        """
        ...


@dataclass(frozen=True, slots=True)
class AdmitAsk:
    """The rate admission a decision asks for with its replay lookup.

    Attributes:
        bucket / rate: the rate budget (``descriptors.rate_of``).
        request_id: the request admitted (once per request id).
        fresh: take a call of the rate if the call is not a replay.
        replay: take a call of the rate if the call is a replay.
    """

    bucket: str
    rate: RateLimit
    request_id: str
    fresh: bool
    replay: bool


@dataclass(frozen=True, slots=True)
class Screened:
    """What the store answered: the key's record and, when admission was asked, the rate's answer.

    Attributes:
        state: the idempotency record (``None``: the key was never used).
        limit: the rate's answer, ``None`` when no admission applied
            (:func:`~effectgate.policy.pipeline.gate.wants_admission`).
    """

    state: ReplayState | None
    limit: LimitDecision | None


class ReplayGate(Protocol):
    """Reads a key's idempotency record and takes the call's rate when it runs now (one round trip)."""

    async def screen(self, principal: str, idempotency_key: str, request_hash: str, ask: AdmitAsk) -> Screened:
        """The record of ``(principal, idempotency_key)`` and, when the call takes its rate, the rate's answer.

        Whether it does: :func:`~effectgate.policy.pipeline.gate.wants_admission`.

        Raises:
            IndexLost: the index has no epoch marker (nothing was taken).
            PolicyError: ``idempotency_store_unavailable`` when the store cannot answer,
                ``rate_limiter_unavailable`` when only the limiter failed; the caller
                denies (fail closed).
        """
        ...


class PolicyStore(Protocol):
    """The policy in force (``current``), every published version, and the seeded file's version.

    Every method may raise ``nats.errors.Error`` (the bucket cannot be reached).
    """

    async def current(self) -> CurrentEntry:
        """The policy in force and its revision."""
        ...

    async def version(self, version: str) -> PublishedPolicy | None:
        """A published version, or ``None``."""
        ...

    async def file_version(self) -> str | None:
        """The version of the policy file last seeded, or ``None``."""
        ...

    async def replace_current(self, policy: PublishedPolicy, revision: int | None) -> int:
        """Put ``policy`` in force if ``current`` is still at ``revision``; return the new revision.

        Raises:
            PolicyConflict: ``current`` moved since it was read.
        """
        ...

    async def mark_file(self, version: str) -> None:
        """Record that the policy file of ``version`` was seeded."""
        ...


class BudgetLedger(Protocol):
    """Budget counters and records (Redis: ``adapters.redis_budgets``).

    Every method that touches counters raises :class:`~effectgate.policy.errors.BudgetUnavailable`
    when the store cannot answer and :class:`~effectgate.policy.errors.BudgetsLost` when the
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


class RebuildableLedger(Rebuildable, Protocol):
    """A ledger that can be rebuilt: the epoch and lock of :class:`Rebuildable`, and ``restore``."""

    async def restore(
        self, principal: str, request_id: str, units: int, charges: Sequence[Charge], state: RecordState
    ) -> bool:
        """See :meth:`BudgetLedger.restore`."""
        ...


class SpendTrail(Protocol):
    """What the stream says about admitted calls (the rebuild reads it; adapter: ``adapters.stream``).

    Each event counts only when it is signed by its service's key and names the request
    its subject names; of a per-request subject only the first such event counts.
    """

    def decisions(self) -> AsyncIterator[DecisionMade]:
        """Every decision signed by the policy key, oldest first."""
        ...

    async def grant(self, principal: str, request_id: str) -> ApprovalGranted | None:
        """The request's grant signed by the approvals key, or ``None``."""
        ...

    async def receipt(self, principal: str, request_id: str) -> ReceiptIssued | None:
        """The request's receipt signed by the executor's receipts key, or ``None``."""
        ...

    async def settled(self, principal: str, request_id: str) -> str | None:
        """The last ``ran`` / ``not_run`` resolution of the request's ``uncertain`` call (receipts key), or ``None``."""
        ...
