"""The lock around rebuilding a Redis index from the stream, and the epoch it sets at the end.

One instance rebuilds at a time (a short lease, renewed while it works, so a rebuilder
that dies frees it within seconds). A renewal never takes the lock anew: if Redis
restarted, the lock is gone and the renewal fails, so the rebuild starts over.

The lock and the epoch carry the replication id of the primary that set them
(:data:`~effectgate.shared.runtime.redis_clients.STAMP_EPOCH`): after a failover the
promoted replica's copy of a lock is held by nobody, so a rebuild that was running on the
old primary (whose restores the replica may lack) starts over instead of declaring the
index complete, and the next rebuilder takes the lock at once.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from effectgate.shared.runtime.redis_clients import STAMP_EPOCH

__all__ = ["LEASE_S", "RebuildLock"]

LEASE_S = 15.0
"""How long a rebuilder holds the lock without renewing it, seconds."""

_TAKE = (
    STAMP_EPOCH
    + """
-- KEYS: lock; ARGV: owner, lease_ms. 1 when taken; a lock another primary set is held by nobody.
local held = redis.call('GET', KEYS[1])
if held and string.sub(held, 1, string.len(replid) + 1) == replid .. ':' then return 0 end
redis.call('SET', KEYS[1], stamped(ARGV[1]), 'PX', ARGV[2])
return 1
"""
)

_RENEW = (
    STAMP_EPOCH
    + """
-- KEYS: lock; ARGV: owner, lease_ms. 1 when the owner still holds the lock (lease renewed).
if redis.call('GET', KEYS[1]) ~= stamped(ARGV[1]) then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
)

_FINISH = (
    STAMP_EPOCH
    + """
-- KEYS: lock, epoch; ARGV: owner, epoch. 1 when the epoch was set (the lock was still held).
if redis.call('GET', KEYS[1]) ~= stamped(ARGV[1]) then return 0 end  -- gone with a restart or a failover
redis.call('SET', KEYS[2], stamped(ARGV[2]))  -- bound to this primary: a failover drops it
redis.call('DEL', KEYS[1])
return 1
"""
)


class RebuildLock:
    """The rebuild lock and epoch of one index.

    Args:
        redis: the client.
        lock_key / epoch_key: the index's lock and epoch marker.
    """

    def __init__(self, redis: aioredis.Redis, lock_key: str, epoch_key: str) -> None:
        self._keys = (lock_key, epoch_key)
        self._take, self._renew = redis.register_script(_TAKE), redis.register_script(_RENEW)
        self._finish = redis.register_script(_FINISH)

    async def take(self, owner: str, lease_s: float = LEASE_S) -> bool:
        """Take the lock for ``lease_s`` seconds; False when someone holds it.

        Raises:
            redis.exceptions.RedisError: Redis cannot answer.
        """
        return int(await self._take(keys=[self._keys[0]], args=[owner, int(lease_s * 1000)])) == 1

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
