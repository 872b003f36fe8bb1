"""The one way out of the executor: every receipt, result and log line is scrubbed of secrets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from effectgate.contracts.events import DecisionMade, EffectClaimed, ReceiptIssued, ResultRef, UncertainResolved
from effectgate.contracts.rpc.recheck import RecheckAnswer, RecheckQuery
from effectgate.executor.ports import ApprovalTrail, Bus
from effectgate.executor.receipts.fitting import fit
from effectgate.executor.receipts.waiting_on import stamped
from effectgate.shared.consumer.request_log import note
from effectgate.shared.secrets.redaction import Redactor

__all__ = ["INLINE_SCRUB_BYTES", "ScrubbingBus", "note_receipt"]

INLINE_SCRUB_BYTES = 16_384
"""Largest result (its JSON, bytes) scrubbed on the event loop rather than in a worker thread (module doc)."""


class ScrubbingBus:
    """:class:`~effectgate.executor.ports.Outlet` over ``bus``: receipts leave only sealed.

    Args:
        bus: the bus that publishes and reads.
        redactor: the rules of what is a secret.
    """

    def __init__(self, bus: Bus, redactor: Redactor) -> None:
        self._bus, self._redactor = bus, redactor

    async def seal(self, receipt: ReceiptIssued) -> ReceiptIssued:
        """``receipt`` scrubbed of secrets, what changed added to ``redactions`` (module doc), then fitted.

        It first names the approval its request waited on (:func:`~effectgate.executor.receipts.waiting_on.stamped`).
        The sealed receipt is fitted into one bus message (:func:`effectgate.executor.receipts.fitting.fit`:
        a reason, redactions or result too large is kept out of band), so whatever grew in it,
        the one receipt of its request is stored and published.
        """
        receipt = stamped(receipt)
        if receipt.redactions is None and not _small(receipt.result):
            sealed = await asyncio.to_thread(self._sealed, receipt)
        else:
            sealed = self._sealed(receipt)

        async def keep(data: bytes) -> ResultRef:
            return await self._bus.store_result(receipt.principal, receipt.request_id, data)

        return await fit(sealed, self._bus.receipt_limit_bytes(), keep)

    async def scrub_result(self, result: Any) -> tuple[Any, tuple[str, ...]]:
        """``result`` scrubbed, and the pointers (under ``/result``) of what changed; off the loop unless small."""
        if _small(result):
            return self._redactor.value(result, "/result")
        return await asyncio.to_thread(self._redactor.value, result, "/result")

    async def publish_receipt(self, receipt: ReceiptIssued) -> bool:
        """See :meth:`~effectgate.executor.ports.Bus.publish_receipt`; the receipt is sealed first.

        The receipt published is the message's request line (:func:`note_receipt`).
        """
        sealed = await self.seal(receipt)
        stored = await self._bus.publish_receipt(sealed)
        note_receipt(sealed, stored)
        return stored

    async def decision(self, principal: str, request_id: str) -> DecisionMade | None:  # noqa: D102
        return await self._bus.decision(principal, request_id)

    async def receipt(self, principal: str, request_id: str) -> ReceiptIssued | None:  # noqa: D102
        return await self._bus.receipt(principal, request_id)

    async def approvals(self, principal: str, request_id: str) -> ApprovalTrail:  # noqa: D102
        return await self._bus.approvals(principal, request_id)

    async def claim_effect(self, claim: EffectClaimed, key_digest: str) -> EffectClaimed | None:  # noqa: D102
        return await self._bus.claim_effect(claim, key_digest)

    async def store_result(self, principal: str, request_id: str, data: bytes) -> ResultRef:  # noqa: D102
        return await self._bus.store_result(principal, request_id, data)

    async def recheck(self, query: RecheckQuery) -> RecheckAnswer | None:  # noqa: D102
        return await self._bus.recheck(query)

    def claims(self) -> AsyncIterator[EffectClaimed]:  # noqa: D102
        return self._bus.claims()

    def receipt_limit_bytes(self) -> int:  # noqa: D102
        return self._bus.receipt_limit_bytes()

    def receipts_after(self, seq: int) -> AsyncIterator[tuple[int, ReceiptIssued | None]]:  # noqa: D102
        return self._bus.receipts_after(seq)

    async def resolutions(self, principal: str, request_id: str) -> tuple[UncertainResolved, ...]:  # noqa: D102
        return await self._bus.resolutions(principal, request_id)

    async def publish_resolution(self, resolution: UncertainResolved) -> bool:
        """See :meth:`~effectgate.executor.ports.Bus.publish_resolution`; its note is scrubbed of secrets first."""
        return await self._bus.publish_resolution(
            msgspec.structs.replace(resolution, note=self._redactor.text(resolution.note))
        )

    def _sealed(self, receipt: ReceiptIssued) -> ReceiptIssued:
        reason = self._redactor.text(receipt.reason)
        found = ["/reason"] if reason is not receipt.reason else []
        result = receipt.result
        if receipt.redactions is None:
            result, in_result = self._redactor.value(receipt.result, "/result")
            found += in_result
        redactions = tuple(dict.fromkeys([*(receipt.redactions or ()), *found]))
        return msgspec.structs.replace(receipt, reason=reason, result=result, redactions=redactions)


def _small(result: Any) -> bool:
    """Whether ``result`` is scrubbed on the event loop: its JSON is at most :data:`INLINE_SCRUB_BYTES`."""
    try:
        return len(msgspec.json.encode(result)) <= INLINE_SCRUB_BYTES
    except (TypeError, ValueError):  # not JSON: leave it to the thread, as before
        return False


def note_receipt(receipt: ReceiptIssued, stored: bool) -> None:
    """Note ``receipt`` as the request line (:mod:`effectgate.shared.consumer.request_log`): ids, names and codes only.

    ``tool_ms`` is the tool's run time; ``stored=False``: the request had a receipt already.
    """
    note(
        "receipt",
        request_id=receipt.request_id,
        principal=receipt.principal,
        tool=receipt.tool,
        operation=receipt.operation,
        outcome=receipt.outcome,
        reason_code=receipt.reason_code,
        replay_of=receipt.replay_of,
        tool_ms=receipt.duration_ms,
        stored=None if stored else False,
    )
