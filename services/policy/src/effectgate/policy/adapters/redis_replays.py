"""Reads the executor's idempotency records to recognise a replay before deciding again."""

from __future__ import annotations

import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from effectgate.contracts.errors import IndexLost
from effectgate.policy.errors import PolicyError
from effectgate.policy.ports import ReplayState
from effectgate.shared.stores.idempotency import EPOCH_KEY, record_key

__all__ = ["RedisReplayIndex"]

log = logging.getLogger("effectgate.policy")


class RedisReplayIndex:
    """:class:`~effectgate.policy.ports.ReplayIndex` over the executor's Redis records (read only)."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis

    async def lookup(self, principal: str, idempotency_key: str) -> ReplayState | None:
        """Return the key's state, or ``None`` when it was never used.

        Raises:
            PolicyError: ``idempotency_store_unavailable`` when Redis cannot answer.
            IndexLost: the index has no epoch marker (it lost its state; being rebuilt).
        """
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.exists(EPOCH_KEY)
                pipe.hmget(record_key(principal, idempotency_key), ["state", "fp"])
                epoch, (state, fingerprint) = await pipe.execute()
        except (RedisError, OSError) as error:
            log.warning("idempotency store failed: %s", error)
            raise PolicyError("idempotency_store_unavailable", "the idempotency store cannot be reached") from None
        if not epoch:
            raise IndexLost()
        if fingerprint is None:
            return None
        text = fingerprint.decode() if isinstance(fingerprint, bytes) else str(fingerprint)
        return ReplayState(done=state in (b"done", "done"), fingerprint=text)
