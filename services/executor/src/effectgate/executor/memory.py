"""In-memory twins of the executor's ports, for unit tests (each method atomic on one loop)."""

from __future__ import annotations

import gzip
import hashlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace

import msgspec

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.errors import IndexLost
from effectgate.contracts.events import DecisionMade, EffectClaimed, ReceiptIssued, ResultRef, UncertainResolved
from effectgate.contracts.rpc.recheck import RecheckAnswer, RecheckQuery
from effectgate.executor.domain import Claim, ClaimState, ttl_ms
from effectgate.executor.ports import RECEIPT_HEADROOM_BYTES, ApprovalTrail, ClaimRequest, Restored
from effectgate.shared.stores.idempotency import key_digest
from effectgate.shared.stores.rebuilding import MemoryEpoch

__all__ = ["InMemoryBus", "InMemoryIdempotencyStore", "wall_clock_ms"]


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
    instance: str = ""
    nonce: str = ""
    receipt: bytes | None = None


class InMemoryIdempotencyStore(MemoryEpoch):
    """:class:`~effectgate.executor.ports.IdempotencyStore` in one process's memory.

    Each method runs without awaiting, so it is atomic on one event loop.

    Args:
        clock_ms: the clock, Unix epoch milliseconds; the wall clock by default.
    """

    def __init__(self, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        super().__init__()
        self._clock_ms = clock_ms
        self._records: dict[tuple[str, str], _Record] = {}
        self._markers: dict[tuple[str, str], str] = {}
        self._alive: dict[str, int] = {}

    async def claim(self, request: ClaimRequest) -> Claim:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.claim`."""
        self._check_epoch()
        now, key = self._clock_ms(), (request.principal, key_digest(request.idempotency_key))
        if self._markers.get((request.principal, request.request_id)) == "ended":
            return Claim(ClaimState.ENDED, None, None, None)
        record = self._live(key, now)
        if record is None:
            lease = now + ttl_ms(request.ttl_s)
            fields = (request.fingerprint, request.request_id, now, lease, request.instance, request.nonce)
            self._records[key] = _Record(ClaimState.INFLIGHT, *fields)
            self._markers[(request.principal, request.request_id)] = "run"
            return Claim(ClaimState.NEW, request.request_id, None, now, request.instance)
        return _answer(record, request)

    async def end_request(self, principal: str, request_id: str, ttl_s: float) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.end_request`."""
        self._check_epoch()
        marker = self._markers.setdefault((principal, request_id), "ended")
        return marker == "ended"

    async def complete(
        self, principal: str, idempotency_key: str, request_id: str, receipt: bytes, ttl_s: float
    ) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.complete`."""
        self._check_epoch()
        retention_ms, now = ttl_ms(ttl_s), self._clock_ms()
        key = (principal, key_digest(idempotency_key))
        record = self._live(key, now)
        if record is None or record.owner != request_id:
            return False
        if record.state is ClaimState.DONE:
            return record.receipt == receipt
        done = replace(record, state=ClaimState.DONE, receipt=bytes(receipt), expires_at_ms=now + retention_ms)
        self._records[key] = done
        return True

    async def release(self, principal: str, idempotency_key: str, request_id: str) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.release`."""
        self._check_epoch()
        key = (principal, key_digest(idempotency_key))
        record = self._live(key, self._clock_ms())
        if record is None or record.state is not ClaimState.INFLIGHT or record.owner != request_id:
            return False
        del self._records[key]
        return True

    async def take_over(self, principal: str, idempotency_key: str, old_request_id: str, new_request_id: str) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.take_over`."""
        self._check_epoch()
        now, key = self._clock_ms(), (principal, key_digest(idempotency_key))
        record = self._live(key, now)
        if record is None or record.state is not ClaimState.INFLIGHT:
            return False
        if record.owner == new_request_id:
            return True
        if record.owner != old_request_id:
            return False
        self._records[key] = replace(record, owner=new_request_id, claimed_at_ms=now)
        return True

    async def is_alive(self, instance: str) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.is_alive`."""
        return self._alive.get(instance, 0) > self._clock_ms()

    async def heartbeat(self, instance: str, ttl_s: float) -> None:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.heartbeat`."""
        self._alive[instance] = self._clock_ms() + ttl_ms(ttl_s)

    async def restore(self, principal: str, key_digest: str, record: Restored) -> None:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.restore`."""
        if record.receipt is None:
            self._markers.setdefault((principal, record.owner), "run")
        state = ClaimState.DONE if record.receipt is not None else ClaimState.INFLIGHT
        expires = self._clock_ms() + ttl_ms(record.ttl_s)
        fields = (record.fingerprint, record.owner, record.claimed_at_ms, expires, record.instance, "")
        self._records[(principal, key_digest)] = _Record(state, *fields, receipt=record.receipt)

    def lose_everything(self) -> None:
        """Forget every record, marker and the epoch, as a Redis restarted empty would."""
        self._records.clear()
        self._markers.clear()
        self.forget_epoch()

    def _check_epoch(self) -> None:
        if self.epoch is None:
            raise IndexLost()

    def _live(self, key: tuple[str, str], now_ms: int) -> _Record | None:
        record = self._records.get(key)
        if record is not None and record.expires_at_ms <= now_ms:
            del self._records[key]
            return None
        return record


def _answer(record: _Record, request: ClaimRequest) -> Claim:
    if record.owner == request.request_id and record.nonce == request.nonce and record.state is ClaimState.INFLIGHT:
        return Claim(ClaimState.NEW, record.owner, None, record.claimed_at_ms, record.instance)
    if record.fingerprint != request.fingerprint:
        return Claim(ClaimState.MISMATCH, record.owner, None, None)
    return Claim(record.state, record.owner, record.receipt, record.claimed_at_ms, record.instance or None)


@dataclass
class InMemoryBus:
    """:class:`~effectgate.executor.ports.Bus` over dictionaries; ``answer`` decides re-checks."""

    receipts: dict[str, ReceiptIssued] = field(default_factory=dict)
    decisions: dict[str, DecisionMade] = field(default_factory=dict)
    trails: dict[str, ApprovalTrail] = field(default_factory=dict)
    claims_made: dict[tuple[str, str], EffectClaimed] = field(default_factory=dict)
    results: dict[str, bytes] = field(default_factory=dict)
    answer: Callable[[RecheckQuery], RecheckAnswer | None] | None = None
    rechecks: list[RecheckQuery] = field(default_factory=list)
    max_payload: int = 1_048_576
    """The bus's message limit, bytes (NATS's default ``max_payload``)."""
    resolved: list[UncertainResolved] = field(default_factory=list)

    async def publish_receipt(self, receipt: ReceiptIssued) -> bool:  # noqa: D102
        if (size := len(msgspec.json.encode(receipt)) + RECEIPT_HEADROOM_BYTES) > self.max_payload:
            raise ValueError(f"a message of {size} bytes is over max_payload")  # nats-py's MaxPayloadError
        if receipt.request_id in self.receipts:
            return False
        self.receipts[receipt.request_id] = receipt
        return True

    async def decision(self, principal: str, request_id: str) -> DecisionMade | None:  # noqa: D102
        return self.decisions.get(request_id)

    async def receipt(self, principal: str, request_id: str) -> ReceiptIssued | None:  # noqa: D102
        return self.receipts.get(request_id)

    async def approvals(self, principal: str, request_id: str) -> ApprovalTrail:  # noqa: D102
        return self.trails.get(request_id, ApprovalTrail())

    async def claim_effect(self, claim: EffectClaimed, key_digest: str) -> EffectClaimed | None:  # noqa: D102
        prior = self.claims_made.setdefault((claim.principal, key_digest), claim)
        return None if prior is claim else prior

    async def store_result(self, principal: str, request_id: str, data: bytes) -> ResultRef:  # noqa: D102
        packed = gzip.compress(data)
        run_id = f"{request_id}_{len(self.results)}"  # one run id per call, as on the stream
        prefix = Subjects.result_prefix(principal, run_id)
        self.results[prefix] = packed
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        return ResultRef(subject_prefix=prefix, chunks=1, size_bytes=len(data), stored_bytes=len(packed), sha256=digest)

    async def recheck(self, query: RecheckQuery) -> RecheckAnswer | None:  # noqa: D102
        self.rechecks.append(query)
        return self.answer(query) if self.answer else None

    async def claims(self) -> AsyncIterator[EffectClaimed]:  # noqa: D102
        for claim in list(self.claims_made.values()):
            yield claim

    def receipt_limit_bytes(self) -> int:  # noqa: D102
        return self.max_payload - RECEIPT_HEADROOM_BYTES

    async def receipts_after(self, seq: int) -> AsyncIterator[tuple[int, ReceiptIssued | None]]:  # noqa: D102
        for index, receipt in enumerate(list(self.receipts.values()), start=1):
            if index > seq:
                yield index, receipt

    async def resolutions(self, principal: str, request_id: str) -> tuple[UncertainResolved, ...]:  # noqa: D102
        return tuple(r for r in self.resolved if (r.principal, r.request_id) == (principal, request_id))

    async def publish_resolution(self, resolution: UncertainResolved) -> bool:  # noqa: D102
        if any(r.event_id == resolution.event_id for r in self.resolved):
            return False
        self.resolved.append(resolution)
        return True
