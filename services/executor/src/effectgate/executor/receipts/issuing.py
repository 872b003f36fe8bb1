"""How the executor ends a request: a receipt, sealed, stored in the index when a run made it, published.

The receipt is stored in the index before it is published, so a crash between the two
republishes the stored receipt and never re-runs the tool.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import msgspec

from effectgate.contracts.errors import IndexLost
from effectgate.contracts.events import DecisionMade, ReceiptIssued
from effectgate.contracts.vocabulary import Outcome
from effectgate.executor.domain import receipt
from effectgate.executor.errors import ExecutorError
from effectgate.executor.ports import IdempotencyStore, Outlet
from effectgate.shared.consumer.acks import Settle, Settlement
from effectgate.shared.runtime.metrics import record_call

__all__ = ["Issuer"]

log = logging.getLogger("effectgate.executor")


@dataclass(frozen=True)
class Issuer:
    """Issues receipts through ``bus`` (an :class:`~effectgate.executor.ports.Outlet`: sealed first).

    ``ttl_s`` is how long the index keeps a stored receipt, seconds.
    """

    store: IdempotencyStore
    bus: Outlet
    clock: Callable[[], datetime]
    ttl_s: float

    async def issue(
        self, decision: DecisionMade, outcome: Outcome, code: str, reason: str, retry_after_s: float | None = None
    ) -> Settlement:
        """End ``decision``'s request without a run: a receipt of ``outcome``, published (never stored)."""
        issued = receipt(decision, self.clock(), outcome, code, reason, retry_after_s=retry_after_s)
        return await self.send(issued, decision)

    async def complete(self, decision: DecisionMade, issued: ReceiptIssued) -> Settlement:
        """Store the receipt in the index, then publish it; the stream is the record either way.

        A store failure here must not turn into a retry: the tool ran, and a redelivery
        would find its own claim abandoned and end it ``uncertain``. The published receipt
        completes the record instead (a later claim finds it in the stream).
        """
        key = decision.idempotency_key or ""
        issued = await self.bus.seal(issued)
        try:
            await self.store.complete(
                decision.principal, key, decision.request_id, msgspec.json.encode(issued), self.ttl_s
            )
        except (ExecutorError, IndexLost) as error:
            log.error("%s: receipt not stored in the index (%s); publishing it", decision.request_id, error.reason_code)
        return await self.send(issued, decision)

    async def send(self, issued: ReceiptIssued, decision: DecisionMade | None = None) -> Settlement:
        """Publish ``issued``; a receipt stored now for ``decision`` records the call's duration."""
        if await self.bus.publish_receipt(issued) and decision is not None:
            record_call(decision.occurred_at, issued.occurred_at)
        return Settle.ACK
