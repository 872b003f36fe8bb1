"""Ports of the executor: the idempotency index and the stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from effectgate.contracts.events import (
    ApprovalGranted,
    ApprovalRejected,
    ApprovalRequested,
    DecisionMade,
    EffectClaimed,
    ReceiptIssued,
    ResultRef,
    UncertainResolved,
)
from effectgate.contracts.rpc.recheck import RecheckAnswer, RecheckQuery
from effectgate.contracts.tools.contents import ContentState
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.executor.domain import Claim

__all__ = [
    "ApprovalTrail",
    "Bus",
    "ClaimRequest",
    "ContentReading",
    "RECEIPT_HEADROOM_BYTES",
    "IdempotencyStore",
    "Outlet",
    "Restored",
]

RECEIPT_HEADROOM_BYTES = 4_096
"""Room a receipt's message keeps in ``max_payload`` for what is added after it is fitted: its
signature (88 base64 characters) and the message headers (expected subject sequence, trace context), bytes."""


class ContentReading(Protocol):
    """Reads what a call's file references name now (:mod:`effectgate.executor.adapters.contents`)."""

    def read(self, descriptor: ToolDescriptor, operation: str, arguments: dict[str, Any]) -> tuple[ContentState, ...]:
        """One state per file reference of ``operation``'s ``arguments``, in reference order (blocking I/O).

        Raises:
            SchemaUnusable: the input schema holds a file marker where none can be.
        """
        ...


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

    def receipts_after(self, seq: int) -> AsyncIterator[tuple[int, ReceiptIssued | None]]:
        """Every receipt message after stream sequence ``seq``, oldest first, with its sequence.

        ``None`` in place of a message that is not a receipt this executor's key signed for the
        request its subject names (so a reader can bound how many messages it reads).
        """
        ...

    async def resolutions(self, principal: str, request_id: str) -> tuple[UncertainResolved, ...]:
        """The request's resolutions signed by this executor's key, in stream order (others are skipped)."""
        ...

    async def publish_resolution(self, resolution: UncertainResolved) -> bool:
        """Sign and publish ``resolution`` on its request's subject; False when the stream had it already.

        Deduplicated by ``Nats-Msg-Id`` = its ``event_id``, so a stable id is published once.

        Raises:
            nats.errors.Error / OSError: the stream did not confirm (transient).
        """
        ...


class Outlet(Bus, Protocol):
    """A :class:`Bus` through which nothing leaves unscrubbed (:mod:`effectgate.executor.receipts.outlet`).

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
