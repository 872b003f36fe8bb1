"""Rebuilding the idempotency index from the stream after Redis lost it.

The stream is the record, Redis an index: every write's claim is in the stream
(``tg.claim.<p>.<key digest>``, :class:`EffectClaimed`) and so is every receipt.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import msgspec

from effectgate.contracts.events import EffectClaimed
from effectgate.executor.ports import Bus, IdempotencyStore, Restored
from effectgate.shared.stores.rebuilding import rebuild

__all__ = ["rebuild_index"]


async def rebuild_index(
    store: IdempotencyStore, bus: Bus, clock: Callable[[], datetime], owner: str, ttl_s: float
) -> bool:
    """Rebuild the index if its epoch is missing; True when the index is complete afterwards.

    Returns ``False`` when another instance holds the rebuild lock or it was lost (try again later).

    Raises:
        IdempotencyStoreUnavailable: Redis cannot be reached.
        nats.errors.Error: the stream cannot be read.
    """

    async def restore(claim: EffectClaimed) -> int:
        return await _restore(store, bus, clock, claim, ttl_s)

    return await rebuild(store, bus.claims(), restore, owner, "idempotency index")


async def _restore(
    store: IdempotencyStore, bus: Bus, clock: Callable[[], datetime], claim: EffectClaimed, ttl_s: float
) -> int:
    """Write one claim back (done with its receipt, or in flight); 0 when it is past the retention."""
    age_s = (clock() - claim.occurred_at).total_seconds()
    if age_s >= ttl_s:
        return 0
    found = await bus.receipt(claim.principal, claim.request_id)
    record = Restored(
        fingerprint=claim.request_hash,
        owner=claim.request_id,
        instance=claim.instance,
        claimed_at_ms=int(claim.occurred_at.timestamp() * 1000),
        receipt=msgspec.json.encode(found) if found else None,
        ttl_s=ttl_s - age_s,
    )
    await store.restore(claim.principal, claim.key_digest, record)
    return 1
