"""The durable half of the at-most-once record: each write's claim, first on its stream subject.

The index (Redis) can lose a record: restarted empty, restored from an older snapshot, a
failover to a lagging replica. So before a write runs, its claim is also published as
:class:`EffectClaimed` on ``tg.claim.<principal>.<key digest>`` with ``Nats-Expected-Last-
Subject-Sequence: 0``: only the first claim of a key is ever stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import msgspec

from effectgate.contracts.events import DecisionMade, EffectClaimed, ReceiptIssued
from effectgate.executor.domain import Claim, ClaimState, Step, effect_id, prior_claim_step
from effectgate.executor.ports import Bus, IdempotencyStore, Restored
from effectgate.shared.stores.idempotency import key_digest

__all__ = ["DurableClaims"]

log = logging.getLogger("effectgate.executor")


@dataclass
class DurableClaims:
    """Records write claims in the stream and resolves a claim the index had lost."""

    bus: Bus
    store: IdempotencyStore
    clock: Callable[[], datetime]
    instance: str
    ttl_s: float

    async def record(self, decision: DecisionMade) -> tuple[Step, Claim] | None:
        """Publish the claim of ``decision``'s key; ``None`` when it is the first, else what to do.

        Raises:
            nats.errors.Error: the stream did not confirm (transient; nothing ran).
        """
        key = decision.idempotency_key or ""
        claim = EffectClaimed(
            event_id=f"claim:{decision.principal}:{decision.request_id}",
            occurred_at=self.clock(),
            request_id=decision.request_id,
            principal=decision.principal,
            key_digest=key_digest(key),
            request_hash=decision.request_hash or "",
            effect_id=effect_id(decision.principal, key),
            instance=self.instance,
        )
        prior = await self.bus.claim_effect(claim, claim.key_digest)
        return None if prior is None else await self._follow_prior(prior, decision)

    async def _follow_prior(self, prior: EffectClaimed, decision: DecisionMade) -> tuple[Step, Claim]:
        found = await self.bus.receipt(prior.principal, prior.request_id)
        step = prior_claim_step(prior, decision.request_id, decision.request_hash or "", found is not None)
        log.warning(
            "%s: key claimed earlier by %s (index lost it): %s", decision.request_id, prior.request_id, step.value
        )
        record = _restored(prior, found, self.ttl_s)
        await self.store.restore(decision.principal, prior.key_digest, record)
        state = ClaimState.DONE if found else ClaimState.INFLIGHT
        return step, Claim(state, prior.request_id, record.receipt, record.claimed_at_ms, prior.instance)


def _restored(prior: EffectClaimed, found: ReceiptIssued | None, ttl_s: float) -> Restored:
    return Restored(
        fingerprint=prior.request_hash,
        owner=prior.request_id,
        instance=prior.instance,
        claimed_at_ms=int(prior.occurred_at.timestamp() * 1000),
        receipt=msgspec.json.encode(found) if found else None,
        ttl_s=ttl_s,
    )
