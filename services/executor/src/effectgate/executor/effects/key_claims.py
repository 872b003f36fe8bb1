"""The idempotency key's claim in the index: taken, read, held while a run starts, released.

An ``inflight`` claim whose owner's receipt is in the stream reads as done (the index missed
the receipt). An ``inflight`` claim is abandoned past its tool's timeout plus ``stale_grace_s``
whatever its owner, and at once when its owner is this instance and not running it, or an
instance that stopped heart-beating.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

import msgspec

from effectgate.contracts.events import DecisionMade
from effectgate.executor.domain import Claim, ClaimState, stale_at_ms
from effectgate.executor.effects.timing import Timing
from effectgate.executor.ports import ClaimRequest, IdempotencyStore, Outlet

__all__ = ["MAX_WAIT_S", "KeyClaims"]

MAX_WAIT_S = 15.0
"""Longest pause before looking again at a key a live executor is running, seconds."""


@dataclass
class KeyClaims:
    """Claims of this executor ``instance`` in ``store``; receipts read from ``bus``."""

    store: IdempotencyStore
    bus: Outlet
    clock: Callable[[], datetime]
    instance: str
    timing: Timing
    _running: set[tuple[str, str]] = field(default_factory=set, init=False)

    async def claim(self, decision: DecisionMade) -> Claim:
        """Claim ``decision``'s key (a claim that is not new is returned as it stands).

        Raises:
            IdempotencyStoreUnavailable / IndexLost: the index cannot answer (transient: retry).
        """
        claim = await self.store.claim(self._request(decision))
        if claim.state is ClaimState.INFLIGHT and (done := await self._stream_receipt(claim, decision)) is not None:
            return done
        return claim

    def _request(self, decision: DecisionMade) -> ClaimRequest:
        return ClaimRequest(
            principal=decision.principal,
            idempotency_key=decision.idempotency_key or "",
            fingerprint=decision.request_hash or "",
            request_id=decision.request_id,
            instance=self.instance,
            nonce=uuid.uuid4().hex,
            ttl_s=self.timing.idempotency_ttl_s,
        )

    async def _stream_receipt(self, claim: Claim, decision: DecisionMade) -> Claim | None:
        """An in-flight record whose owner's receipt is in the stream is done (the index missed it)."""
        if claim.owner_request_id is None:
            return None
        found = await self.bus.receipt(decision.principal, claim.owner_request_id)
        if found is None:
            return None
        return Claim(ClaimState.DONE, claim.owner_request_id, msgspec.json.encode(found), claim.claimed_at_ms)

    async def abandoned(self, claim: Claim, decision: DecisionMade) -> bool:
        """Whether ``claim`` is an ``inflight`` claim nobody is running any more (module doc)."""
        if claim.state is not ClaimState.INFLIGHT:
            return False
        if self._now_ms() >= self._stale_at(claim, decision):
            return True
        if claim.instance == self.instance:
            return (decision.principal, decision.idempotency_key or "") not in self._running
        return claim.instance is None or not await self.store.is_alive(claim.instance)

    def wait_s(self, claim: Claim, decision: DecisionMade) -> float:
        """How long to wait before looking at a live claim again: until it goes stale, 1 s to :data:`MAX_WAIT_S`."""
        remaining_s = (self._stale_at(claim, decision) - self._now_ms()) / 1000
        return min(max(remaining_s, 1.0), MAX_WAIT_S)

    def _now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)

    def _stale_at(self, claim: Claim, decision: DecisionMade) -> int:
        return stale_at_ms(claim, decision.timeout_s or 30.0, self.timing.stale_grace_s)

    @contextmanager
    def holding(self, decision: DecisionMade) -> Iterator[None]:
        """Count ``decision``'s key as running in this instance for the block."""
        key = (decision.principal, decision.idempotency_key or "")
        self._running.add(key)
        try:
            yield
        finally:
            self._running.discard(key)

    async def release(self, decision: DecisionMade) -> None:
        """Free ``decision``'s key (nothing ran), so the agent may retry it."""
        await self.store.release(decision.principal, decision.idempotency_key or "", decision.request_id)
