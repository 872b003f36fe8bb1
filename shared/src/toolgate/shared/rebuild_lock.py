"""The lock around rebuilding a Redis index from the stream, and the epoch it sets at the end.

One instance rebuilds at a time (``SET NX`` with a short lease, renewed while it works, so
a rebuilder that dies frees it within seconds). A renewal never takes the lock anew: if
Redis restarted, the lock is gone and the renewal fails, so the rebuild starts over. The
epoch marker that declares the index complete is set only if the lock is still there, in
one script: if Redis restarted empty while the rebuild ran, the lock went with it, the
epoch is not set, and the rebuild starts over instead of declaring a half-empty index
complete.
"""

from __future__ import annotations

import redis.asyncio as aioredis

__all__ = ["LEASE_S", "RebuildLock"]

LEASE_S = 15.0
"""How long a rebuilder holds the lock without renewing it, seconds."""

_RENEW = """
-- KEYS: lock; ARGV: owner, lease_ms. 1 when the owner still holds the lock (lease renewed).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

_FINISH = """
-- KEYS: lock, epoch; ARGV: owner, epoch. 1 when the epoch was set (the lock was still held).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end  -- gone with a restart: start over
redis.call('SET', KEYS[2], ARGV[2])
redis.call('DEL', KEYS[1])
return 1
"""


class RebuildLock:
    """The rebuild lock and epoch of one index.

    Args:
        redis: the client.
        lock_key / epoch_key: the index's lock and epoch marker.
    """

    def __init__(self, redis: aioredis.Redis, lock_key: str, epoch_key: str) -> None:
        self._redis, self._keys = redis, (lock_key, epoch_key)
        self._renew, self._finish = redis.register_script(_RENEW), redis.register_script(_FINISH)

    async def take(self, owner: str, lease_s: float = LEASE_S) -> bool:
        """Take the lock for ``lease_s`` seconds; False when someone holds it.

        Raises:
            redis.exceptions.RedisError: Redis cannot answer.
        """
        return bool(await self._redis.set(self._keys[0], owner, nx=True, px=int(lease_s * 1000)))

    async def renew(self, owner: str, lease_s: float = LEASE_S) -> bool:
        """Renew the lease of ``owner``; False when it no longer holds the lock (start over).

        Raises:
            redis.exceptions.RedisError: Redis cannot answer.
        """
        return int(await self._renew(keys=[self._keys[0]], args=[owner, int(lease_s * 1000)])) == 1

    async def finish(self, owner: str, epoch: str) -> bool:
        """Set the epoch and free the lock if ``owner`` still holds it; False means: start over.

        Raises:
            redis.exceptions.RedisError: Redis cannot answer.
        """
        return int(await self._finish(keys=list(self._keys), args=[owner, epoch])) == 1
