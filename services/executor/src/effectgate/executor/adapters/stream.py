"""The executor's :class:`~effectgate.executor.ports.Bus` on NATS JetStream."""

from __future__ import annotations

import gzip
import hashlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client
from nats.js import JetStreamContext

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects, names_its_request
from effectgate.contracts.events import (
    ApprovalGranted,
    ApprovalRejected,
    ApprovalRequested,
    DecisionMade,
    EffectClaimed,
    ReceiptIssued,
    ResultRef,
    UncertainResolved,
    decode_event,
)
from effectgate.contracts.integrity.signing import sign_event, signed_by
from effectgate.contracts.rpc.recheck import RecheckAnswer, RecheckQuery
from effectgate.executor.ports import RECEIPT_HEADROOM_BYTES, ApprovalTrail
from effectgate.shared.stores.stream import next_message, publish_event, publish_once, request_recheck

__all__ = ["CHUNK_BYTES", "StreamBus"]

log = logging.getLogger("effectgate.executor")
E = TypeVar("E")

CHUNK_BYTES = 262_144
"""Largest result chunk, bytes (well under the 1 MiB NATS payload limit; smaller under a smaller one)."""

FirstReal = Callable[[], Awaitable[tuple[E | None, int]]]
"""Reads a subject: its first real event (or ``None``) and its last stream sequence."""

MAX_EVENTS_PER_SUBJECT = 16
"""How many messages of one per-request subject are read at most (grants, rejections)."""

MAX_RESOLUTIONS = 64
"""How many resolutions of one request are read at most (each is an operator's or the reconciler's act)."""


class StreamBus:
    """:class:`~effectgate.executor.ports.Bus` over one NATS connection.

    Args:
        nc: the connection (request/reply for re-checks).
        js: its JetStream context.
        recheck_timeout_s: how long to wait for the policy's re-check answer, seconds.
    """

    def __init__(
        self, nc: Client, js: JetStreamContext, receipts_key: Ed25519PrivateKey, recheck_timeout_s: float = 2.0
    ) -> None:
        self._nc, self._js, self._recheck_timeout_s = nc, js, recheck_timeout_s
        self._signer, self._verifier = receipts_key, receipts_key.public_key()

    async def publish_receipt(self, receipt: ReceiptIssued) -> bool:
        """See :meth:`~effectgate.executor.ports.Bus.publish_receipt`; signed, published after any forgery."""
        subject, signed = Subjects.receipt(receipt.principal, receipt.request_id), sign_event(receipt, self._signer)

        async def first_real() -> tuple[ReceiptIssued | None, int]:
            return await self._receipt_on(subject, receipt.principal, receipt.request_id)

        return await self._publish_first(subject, signed, first_real) is None

    async def _publish_first(
        self, subject: str, event: E, first_real: Callable[[], Awaitable[tuple[E | None, int]]]
    ) -> E | None:
        """Publish ``event`` as the first real one on ``subject``; ``None`` when stored, else the real one found.

        A subject whose messages are all junk (a forgery, or a server reply an agent aimed at
        it) is not taken: the event is published after the last of them
        (``Nats-Expected-Last-Subject-Sequence``), so junk can neither block nor replace it.

        Raises:
            RuntimeError: still not stored after :data:`MAX_EVENTS_PER_SUBJECT` attempts.
        """
        after = 0
        for _ in range(MAX_EVENTS_PER_SUBJECT):
            if await publish_once(self._js, subject, event, after_seq=after):
                return None
            found, after = await first_real()
            if found is not None:
                return found
            log.error("%s holds only messages that are not real: publishing after them", subject)
        raise RuntimeError(f"{subject}: not published after {MAX_EVENTS_PER_SUBJECT} attempts")

    async def decision(self, principal: str, request_id: str) -> DecisionMade | None:
        """See :meth:`~effectgate.executor.ports.Bus.decision`."""
        found = _first(await self._events(Subjects.decision(principal, request_id), 1), DecisionMade)
        return found if _about(found, principal, request_id) else None

    async def receipt(self, principal: str, request_id: str) -> ReceiptIssued | None:
        """See :meth:`~effectgate.executor.ports.Bus.receipt`: the first one this executor's key signed."""
        found, _ = await self._receipt_on(Subjects.receipt(principal, request_id), principal, request_id)
        return found

    async def _receipt_on(self, subject: str, principal: str, request_id: str) -> tuple[ReceiptIssued | None, int]:
        """The first validly signed receipt of the request on ``subject``, and the subject's last sequence."""
        seq, last = 1, 0
        while (message := await self._next(subject, seq)) is not None:
            seq, last = message.seq + 1, message.seq
            event = _decoded(message.data)
            mine = isinstance(event, ReceiptIssued) and _about(event, principal, request_id)
            if mine and signed_by(message.data, self._verifier):
                return event, last
        return None, last

    async def approvals(self, principal: str, request_id: str) -> ApprovalTrail:
        """See :meth:`~effectgate.executor.ports.Bus.approvals`."""
        requested = await self._events(Subjects.approval("requested", principal, request_id), 1)
        granted = await self._events(Subjects.approval("granted", principal, request_id))
        rejected = await self._events(Subjects.approval("rejected", principal, request_id))
        first = _first(requested, ApprovalRequested)
        return ApprovalTrail(
            requested=first if _about(first, principal, request_id) else None,
            granted=tuple(e for e in granted if isinstance(e, ApprovalGranted) and _about(e, principal, request_id)),
            rejected=tuple(e for e in rejected if isinstance(e, ApprovalRejected) and _about(e, principal, request_id)),
        )

    async def claim_effect(self, claim: EffectClaimed, key_digest: str) -> EffectClaimed | None:
        """See :meth:`~effectgate.executor.ports.Bus.claim_effect`."""
        subject = Subjects.claim(claim.principal, key_digest)

        async def first_real() -> tuple[EffectClaimed | None, int]:
            return await self._claim_on(subject, claim.principal, key_digest)

        return await self._publish_first(subject, claim, first_real)

    async def _claim_on(self, subject: str, principal: str, key_digest: str) -> tuple[EffectClaimed | None, int]:
        """The first claim of this key on ``subject`` (junk skipped), and the subject's last sequence."""
        seq, last = 1, 0
        while (message := await self._next(subject, seq)) is not None:
            seq, last = message.seq + 1, message.seq
            event = _decoded(message.data)
            if isinstance(event, EffectClaimed) and (event.principal, event.key_digest) == (principal, key_digest):
                return event, last
        return None, last

    async def store_result(self, principal: str, request_id: str, data: bytes) -> ResultRef:
        """See :meth:`~effectgate.executor.ports.Bus.store_result` (one run id per call, so chunks never mix)."""
        run_id = f"{request_id}_{secrets.token_hex(4)}"
        packed = gzip.compress(data, mtime=0)
        size = min(CHUNK_BYTES, self.receipt_limit_bytes())  # a server with a smaller max_payload: smaller chunks
        chunks = [packed[i : i + size] for i in range(0, len(packed), size)]
        for index, chunk in enumerate(chunks):
            headers = {"Nats-Expected-Last-Subject-Sequence": "0"}
            subject = Subjects.result_chunk(principal, run_id, index)
            await self._js.publish(subject, chunk, stream=catalog.RESULTS_STREAM, headers=headers, timeout=10.0)
        prefix = Subjects.result_prefix(principal, run_id)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        return ResultRef(
            subject_prefix=prefix, chunks=len(chunks), size_bytes=len(data), stored_bytes=len(packed), sha256=digest
        )

    async def recheck(self, query: RecheckQuery) -> RecheckAnswer | None:
        """See :meth:`~effectgate.executor.ports.Bus.recheck`."""
        return await request_recheck(self._nc, query, self._recheck_timeout_s)

    def receipt_limit_bytes(self) -> int:
        """See :meth:`~effectgate.executor.ports.Bus.receipt_limit_bytes` (the connected server's ``max_payload``)."""
        return int(self._nc.max_payload) - RECEIPT_HEADROOM_BYTES

    async def claims(self) -> AsyncIterator[EffectClaimed]:
        """See :meth:`~effectgate.executor.ports.Bus.claims`."""
        seq = 1
        while (message := await self._next(Subjects.CLAIMS, seq)) is not None:
            seq = message.seq + 1
            event = _decoded(message.data)
            if isinstance(event, EffectClaimed):
                yield event

    async def receipts_after(self, seq: int) -> AsyncIterator[tuple[int, ReceiptIssued | None]]:
        """See :meth:`~effectgate.executor.ports.Bus.receipts_after`."""
        while (message := await self._next(Subjects.RECEIPTS, seq + 1)) is not None:
            seq, event = message.seq, _decoded(message.data)
            about = isinstance(event, ReceiptIssued) and names_its_request(message.subject, event)
            yield seq, event if about and signed_by(message.data, self._verifier) else None

    async def resolutions(self, principal: str, request_id: str) -> tuple[UncertainResolved, ...]:
        """See :meth:`~effectgate.executor.ports.Bus.resolutions` (at most :data:`MAX_RESOLUTIONS` read)."""
        subject, seq, found = Subjects.resolution(principal, request_id), 1, list[UncertainResolved]()
        while len(found) < MAX_RESOLUTIONS and (message := await self._next(subject, seq)) is not None:
            seq, event = message.seq + 1, _decoded(message.data)
            about = isinstance(event, UncertainResolved) and _about(event, principal, request_id)
            if about and signed_by(message.data, self._verifier):
                found.append(event)
        return tuple(found)

    async def publish_resolution(self, resolution: UncertainResolved) -> bool:
        """See :meth:`~effectgate.executor.ports.Bus.publish_resolution`."""
        subject = Subjects.resolution(resolution.principal, resolution.request_id)
        ack = await publish_event(self._js, subject, sign_event(resolution, self._signer))
        return not ack.duplicate

    async def _events(self, subject: str, most: int = MAX_EVENTS_PER_SUBJECT) -> list[Any]:
        found: list[Any] = []
        seq = 1
        while len(found) < most and (message := await self._next(subject, seq)) is not None:
            found.append(_decoded(message.data))
            seq = message.seq + 1
        return found

    async def _next(self, subject: str, seq: int) -> Any:
        return await next_message(self._js, subject, seq)


def _decoded(data: bytes | None) -> Any:
    try:
        return decode_event(data or b"")
    except msgspec.DecodeError:
        return None


def _about(event: Any, principal: str, request_id: str) -> bool:
    """Whether ``event`` is about the request its subject names (a copy of another request's event is not)."""
    return event is not None and (event.principal, event.request_id) == (principal, request_id)


def _first(events: list[Any], kind: type[E]) -> E | None:
    return events[0] if events and isinstance(events[0], kind) else None
