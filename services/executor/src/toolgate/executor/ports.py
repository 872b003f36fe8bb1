"""Ports of the executor: the idempotency index and the stream.

The index makes a tool run at most once per ``(principal, idempotency key)``. Semantics
follow Stripe's idempotency keys and the IETF draft
``draft-ietf-httpapi-idempotency-key-header`` (a record claimed before the effect, keyed by
server-known principal + client key, holding a request fingerprint; replay of the stored
receipt; refusal of the same key with a different fingerprint; a conflict while the first
request is still in flight):

- ``claim``: absent → record ``{inflight, fingerprint, owner=request_id, claimed_at_ms,
  instance, nonce}`` with a lease of ``ttl_s`` → ``NEW``, and the request's marker becomes
  ``run``; the same claim again (same owner and ``nonce``: a retried call) → ``NEW`` again;
  different fingerprint → ``MISMATCH``; ``done`` → ``DONE`` with the stored receipt; a
  request whose marker says ``ended`` → ``ENDED`` (the backstop ended it: never run);
  else ``INFLIGHT`` with the owner, its instance and ``claimed_at_ms``.
- ``end_request``: the backstop's atomic "this request ends without running": sets the
  request's marker to ``ended`` unless a run already set it to ``run``.
- ``complete``: only the owner sets ``done`` + receipt and the retention ``ttl_s``.
- ``release``: the owner drops an ``inflight`` record whose run never started (nothing ran).
- ``take_over``: the owner-checked hand-over of an ``inflight`` record to a new request.
- ``restore``: the rebuild from the stream writes a record back; ``set_epoch`` marks the
  index complete. Every method raises :class:`~toolgate.executor.errors.IndexLost` while
  the epoch is missing (Redis restarted empty) and
  :class:`~toolgate.executor.errors.IdempotencyStoreUnavailable` when the store cannot answer.

:class:`Bus` is the executor's view of the stream: the events of one request (each the
*first* message on its subject, so a later message squatting there is never read),
publishing receipts and claims, keeping large results, and the policy re-check.

In-memory twins of both live in :mod:`toolgate.executor.memory`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from toolgate.contracts.descriptors import ToolDescriptor
from toolgate.contracts.events import (
    ApprovalGranted,
    ApprovalRejected,
    ApprovalRequested,
    DecisionMade,
    EffectClaimed,
    ReceiptIssued,
    ResultRef,
)
from toolgate.contracts.recheck import RecheckAnswer, RecheckQuery

__all__ = [
    "ApprovalTrail",
    "Bus",
    "Claim",
    "ClaimRequest",
    "ClaimState",
    "DescriptorSource",
    "RECEIPT_HEADROOM_BYTES",
    "IdempotencyStore",
    "Outlet",
    "Restored",
    "ttl_ms",
    "wall_clock_ms",
]

RECEIPT_HEADROOM_BYTES = 4_096
"""Room a receipt's message keeps in ``max_payload`` for what is added after it is fitted: its
signature (88 base64 characters) and the message headers (expected subject sequence, trace context), bytes."""


class DescriptorSource(Protocol):
    """Reads tool descriptors (the registry's KV bucket)."""

    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        """Return the descriptor or ``None``."""
        ...


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
    ENDED = "ended"
    """The backstop ended this request without running it: never run it."""


@dataclass(frozen=True)
class ClaimRequest:
    """One claim: who asks for which key, bound to what.

    Attributes:
        principal / idempotency_key: the key.
        fingerprint: the request hash the key is bound to.
        request_id: the claiming request.
        instance: the executor instance claiming.
        nonce: unique per claim attempt; the same claim retried is recognised by it.
        ttl_s: lease of an ``inflight`` record, seconds.
    """

    principal: str
    idempotency_key: str
    fingerprint: str
    request_id: str
    instance: str
    nonce: str
    ttl_s: float


@dataclass(frozen=True)
class Claim:
    """The answer to a claim.

    Attributes:
        state: what the claim found.
        owner_request_id: request id holding the key; None only when unknown.
        receipt: the stored receipt bytes for ``DONE``, else None.
        claimed_at_ms: when the owner claimed (Unix epoch, milliseconds); None when unknown.
        instance: the executor instance that owns an ``inflight`` record.
    """

    state: ClaimState
    owner_request_id: str | None
    receipt: bytes | None
    claimed_at_ms: int | None
    instance: str | None = None


@dataclass(frozen=True)
class Restored:
    """A record rebuilt from the stream (its claim event and, when ended, its receipt).

    Attributes:
        fingerprint / owner / instance / claimed_at_ms: from the claim event.
        receipt: the owner's receipt bytes when it has one (the record is then ``done``).
        ttl_s: what remains of its retention (or lease), seconds.
    """

    fingerprint: str
    owner: str
    instance: str
    claimed_at_ms: int
    receipt: bytes | None
    ttl_s: float


class IdempotencyStore(Protocol):
    """At-most-once records keyed by ``(principal, idempotency_key)`` (see the module docstring)."""

    async def claim(self, request: ClaimRequest) -> Claim:
        """Atomically claim the key (see the module docstring)."""
        ...

    async def end_request(self, principal: str, request_id: str, ttl_s: float) -> bool:
        """Mark the request ended unless a run started; True when marked (or already ended)."""
        ...

    async def complete(
        self, principal: str, idempotency_key: str, request_id: str, receipt: bytes, ttl_s: float
    ) -> bool:
        """Store ``receipt`` for ``ttl_s`` seconds; False unless ``request_id`` owns the key."""
        ...

    async def release(self, principal: str, idempotency_key: str, request_id: str) -> bool:
        """Drop the ``inflight`` record ``request_id`` owns (its run never started)."""
        ...

    async def take_over(self, principal: str, idempotency_key: str, old_request_id: str, new_request_id: str) -> bool:
        """Hand an ``inflight`` record owned by ``old_request_id`` to ``new_request_id``."""
        ...

    async def is_alive(self, instance: str) -> bool:
        """Whether executor ``instance`` sent a heartbeat recently."""
        ...

    async def heartbeat(self, instance: str, ttl_s: float) -> None:
        """Say that ``instance`` is alive for the next ``ttl_s`` seconds."""
        ...

    async def restore(self, principal: str, key_digest: str, record: Restored) -> None:
        """Write a record rebuilt from the stream (keyed by the key's digest)."""
        ...

    async def has_epoch(self) -> bool:
        """Whether the index is complete (its epoch marker exists)."""
        ...

    async def set_epoch(self, epoch: str) -> None:
        """Mark the index complete."""
        ...

    async def lock_rebuild(self, owner: str, ttl_s: float) -> bool:
        """Take the rebuild lock for ``ttl_s`` seconds; False when another owner holds it."""
        ...

    async def renew_rebuild(self, owner: str, ttl_s: float) -> bool:
        """Renew ``owner``'s rebuild lock; False when it no longer holds it (Redis restarted?)."""
        ...

    async def finish_rebuild(self, owner: str, epoch: str) -> bool:
        """Set the epoch if ``owner`` still holds the rebuild lock (Redis did not restart meanwhile)."""
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
class ApprovalTrail:
    """The approval events of one request, in stream order (signatures not yet verified)."""

    requested: ApprovalRequested | None = None
    granted: tuple[ApprovalGranted, ...] = ()
    rejected: tuple[ApprovalRejected, ...] = ()


class Bus(Protocol):
    """The executor's side of the stream (publish rights: receipts, claims, result chunks)."""

    async def publish_receipt(self, receipt: ReceiptIssued) -> bool:
        """Publish the request's one receipt; False when it already had one.

        Raises:
            nats.errors.Error / OSError: the stream did not confirm (transient).
        """
        ...

    async def decision(self, principal: str, request_id: str) -> DecisionMade | None:
        """The first message on the request's decision subject, if it is a decision."""
        ...

    async def receipt(self, principal: str, request_id: str) -> ReceiptIssued | None:
        """The request's receipt, if it has one."""
        ...

    async def approvals(self, principal: str, request_id: str) -> ApprovalTrail:
        """The request's approval events."""
        ...

    async def claim_effect(self, claim: EffectClaimed, key_digest: str) -> EffectClaimed | None:
        """Publish ``claim`` as the key's first claim; ``None`` when stored, else the earlier claim."""
        ...

    async def store_result(self, principal: str, request_id: str, data: bytes) -> ResultRef:
        """Keep a result's JSON bytes out of band (compressed chunks) and say where."""
        ...

    async def recheck(self, query: RecheckQuery) -> RecheckAnswer | None:
        """Ask the policy service to re-check a call now; ``None`` when it did not answer."""
        ...

    def receipt_limit_bytes(self) -> int:
        """Largest receipt JSON (unsigned) one message carries: ``max_payload`` less :data:`RECEIPT_HEADROOM_BYTES`."""
        ...

    def claims(self) -> AsyncIterator[EffectClaimed]:
        """Every write claim in the stream, oldest first (for rebuilding the index)."""
        ...


class Outlet(Bus, Protocol):
    """A :class:`Bus` through which nothing leaves unscrubbed (:mod:`toolgate.executor.outlet`).

    The executor, the backstop and the runner take an ``Outlet``, never a bare bus.
    """

    async def seal(self, receipt: ReceiptIssued) -> ReceiptIssued:
        """``receipt`` scrubbed of secrets, what changed added to ``redactions``.

        ``reason`` is always scrubbed, ``result`` unless ``redactions`` is already set. Idempotent.
        """
        ...

    async def scrub_result(self, result: Any) -> tuple[Any, tuple[str, ...]]:
        """A tool's result scrubbed of secrets and the pointers (under ``/result``) of what changed."""
        ...
