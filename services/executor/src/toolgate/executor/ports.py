"""Ports of the executor: the idempotency store, and its in-memory twin.

The idempotency store makes a tool run at most once per ``(principal, idempotency key)``.
Semantics follow Stripe's idempotency keys and the IETF draft
``draft-ietf-httpapi-idempotency-key-header`` (a record claimed before the effect, keyed by
server-known principal + client key, holding a request fingerprint; replay of the stored
receipt; refusal of the same key with a different fingerprint; a conflict while the first
request is still in flight):

- ``claim``: absent → record ``{inflight, fingerprint, owner=request_id, claimed_at_ms}``
  with a lease of ``ttl_s`` → ``NEW``; different fingerprint → ``MISMATCH``; ``done`` →
  ``DONE`` with the stored receipt; else ``INFLIGHT`` with the owner and ``claimed_at_ms``.
  A claim never takes a record over, not even for the owner's own ``request_id``: a
  redelivered request finds ``INFLIGHT`` with itself as owner and must not re-run blindly.
- ``complete``: only the owner sets ``done`` + receipt and the retention ``ttl_s``.
- ``take_over``: the owner-checked hand-over of an ``inflight`` record to a new request
  (re-running a READ_ONLY operation whose first run is lost); the lease is kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

__all__ = ["Claim", "ClaimState", "IdempotencyStore", "InMemoryIdempotencyStore", "ttl_ms", "wall_clock_ms"]


class ClaimState(StrEnum):
    """What a claim found."""

    NEW = "new"
    """No record: this request now owns the key and must run the tool."""
    DONE = "done"
    """A receipt is stored: replay it, do not run."""
    MISMATCH = "mismatch"
    """The key was used with another fingerprint: refuse."""
    INFLIGHT = "inflight"
    """Another (or an earlier delivery of this) request holds the key and has no receipt yet."""


@dataclass(frozen=True)
class Claim:
    """The answer to a claim.

    Attributes:
        state: what the claim found.
        owner_request_id: request id holding the key (the caller's own for ``NEW``);
            None only when unknown.
        receipt: the stored receipt bytes for ``DONE``, else None.
        claimed_at_ms: when the owner claimed (Unix epoch, milliseconds); None for ``MISMATCH``.
    """

    state: ClaimState
    owner_request_id: str | None
    receipt: bytes | None
    claimed_at_ms: int | None


class IdempotencyStore(Protocol):
    """At-most-once records keyed by ``(principal, idempotency_key)``.

    Every method raises :class:`toolgate.executor.errors.StoreUnavailable` when the store
    cannot be reached in time; the caller then fails closed.
    """

    async def claim(
        self, principal: str, idempotency_key: str, fingerprint: str, request_id: str, ttl_s: float
    ) -> Claim:
        """Atomically claim the key for ``request_id`` with a lease of ``ttl_s`` seconds."""
        ...

    async def complete(
        self, principal: str, idempotency_key: str, request_id: str, receipt: bytes, ttl_s: float
    ) -> bool:
        """Store ``receipt`` and keep it ``ttl_s`` seconds; False unless ``request_id`` owns the key.

        Completing again with the same receipt is True (a retried completion).
        """
        ...

    async def take_over(self, principal: str, idempotency_key: str, old_request_id: str, new_request_id: str) -> bool:
        """Hand an ``inflight`` record owned by ``old_request_id`` to ``new_request_id``.

        ``claimed_at_ms`` becomes now; the remaining lease is kept. False when the record
        is absent, done, or owned by another request.
        """
        ...


def ttl_ms(ttl_s: float) -> int:
    """Convert a positive ``ttl_s`` to whole milliseconds, at least 1.

    Raises:
        ValueError: ``ttl_s`` is not positive.
    """
    if not ttl_s > 0:
        raise ValueError(f"ttl_s must be positive, got {ttl_s!r}")
    return max(1, round(ttl_s * 1000))


def wall_clock_ms() -> int:
    """Now, as Unix epoch milliseconds."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class _Record:
    state: ClaimState
    fingerprint: str
    owner: str
    claimed_at_ms: int
    expires_at_ms: int
    receipt: bytes | None = None


class InMemoryIdempotencyStore:
    """:class:`IdempotencyStore` in one process's memory, for unit tests.

    Each method runs without awaiting, so it is atomic on one event loop.

    Args:
        clock_ms: the clock, Unix epoch milliseconds; the wall clock by default.
    """

    def __init__(self, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self._clock_ms = clock_ms
        self._records: dict[tuple[str, str], _Record] = {}

    async def claim(
        self, principal: str, idempotency_key: str, fingerprint: str, request_id: str, ttl_s: float
    ) -> Claim:
        """See :meth:`IdempotencyStore.claim`."""
        lease_ms, now = ttl_ms(ttl_s), self._clock_ms()
        record = self._live((principal, idempotency_key), now)
        if record is None:
            self._records[(principal, idempotency_key)] = _Record(
                ClaimState.INFLIGHT, fingerprint, request_id, now, now + lease_ms
            )
            return Claim(ClaimState.NEW, request_id, None, now)
        if record.fingerprint != fingerprint:
            return Claim(ClaimState.MISMATCH, record.owner, None, None)
        return Claim(record.state, record.owner, record.receipt, record.claimed_at_ms)

    async def complete(
        self, principal: str, idempotency_key: str, request_id: str, receipt: bytes, ttl_s: float
    ) -> bool:
        """See :meth:`IdempotencyStore.complete`."""
        retention_ms, now = ttl_ms(ttl_s), self._clock_ms()
        record = self._live((principal, idempotency_key), now)
        if record is None or record.owner != request_id:
            return False
        if record.state is ClaimState.DONE:
            return record.receipt == receipt
        done = replace(record, state=ClaimState.DONE, receipt=bytes(receipt), expires_at_ms=now + retention_ms)
        self._records[(principal, idempotency_key)] = done
        return True

    async def take_over(self, principal: str, idempotency_key: str, old_request_id: str, new_request_id: str) -> bool:
        """See :meth:`IdempotencyStore.take_over`."""
        now = self._clock_ms()
        record = self._live((principal, idempotency_key), now)
        if record is None or record.state is not ClaimState.INFLIGHT or record.owner != old_request_id:
            return False
        self._records[(principal, idempotency_key)] = replace(record, owner=new_request_id, claimed_at_ms=now)
        return True

    def _live(self, key: tuple[str, str], now_ms: int) -> _Record | None:
        record = self._records.get(key)
        if record is not None and record.expires_at_ms <= now_ms:
            del self._records[key]
            return None
        return record
