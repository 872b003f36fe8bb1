"""The idempotency index on Redis: one hash per key, changed only by atomic Lua scripts."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from effectgate.contracts.errors import IndexLost
from effectgate.executor.domain import Claim, ClaimState, ttl_ms
from effectgate.executor.errors import IdempotencyStoreUnavailable
from effectgate.executor.ports import ClaimRequest, Restored
from effectgate.shared.stores.idempotency import EPOCH_KEY, key_digest
from effectgate.shared.stores.rebuild_lock import RebuildLock

__all__ = ["RedisIdempotencyStore"]

_NOW_MS = "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

_CLAIM = (
    """
-- KEYS: record, request marker, epoch; ARGV: fingerprint, request_id, lease_ms, instance, nonce
-- returns {state, owner, receipt, claimed_at_ms, instance}
if redis.call('EXISTS', KEYS[3]) == 0 then return {'epoch_lost'} end
if redis.call('GET', KEYS[2]) == 'ended' then return {'ended', '', '', 0, ''} end
local rec = redis.call('HMGET', KEYS[1], 'state', 'fp', 'owner', 'receipt', 'claimed_at_ms', 'instance', 'nonce')
if not rec[1] then
"""
    + _NOW_MS
    + """
  redis.call('HSET', KEYS[1], 'state', 'inflight', 'fp', ARGV[1], 'owner', ARGV[2], 'claimed_at_ms', now,
             'instance', ARGV[4], 'nonce', ARGV[5])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  redis.call('SET', KEYS[2], 'run', 'PX', ARGV[3])
  return {'new', ARGV[2], '', now, ARGV[4]}
end
if rec[1] == 'inflight' and rec[3] == ARGV[2] and rec[7] == ARGV[5] then
  return {'new', rec[3], '', tonumber(rec[5]) or 0, rec[6] or ''}
end
if rec[2] ~= ARGV[1] then return {'mismatch', rec[3] or '', '', 0, ''} end
return {rec[1], rec[3] or '', rec[4] or '', tonumber(rec[5]) or 0, rec[6] or ''}
"""
)

_END_REQUEST = """
-- KEYS: request marker, epoch; ARGV: ttl_ms. Returns 1 ended, 0 a run started, -1 epoch lost.
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
local marker = redis.call('GET', KEYS[1])
if not marker then
  redis.call('SET', KEYS[1], 'ended', 'PX', ARGV[1])
  return 1
end
if marker == 'ended' then return 1 end
return 0
"""

_COMPLETE = """
-- KEYS[1] record; ARGV: request_id, receipt, retention_ms; returns 1 if stored
local rec = redis.call('HMGET', KEYS[1], 'state', 'owner', 'receipt')
if rec[2] ~= ARGV[1] then return 0 end
if rec[1] == 'done' then
  if rec[3] == ARGV[2] then return 1 end
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'done', 'receipt', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""

_RELEASE = """
-- KEYS[1] record; ARGV: request_id; returns 1 if the inflight record was dropped
local rec = redis.call('HMGET', KEYS[1], 'state', 'owner')
if rec[1] ~= 'inflight' or rec[2] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
"""

_TAKE_OVER = (
    """
-- KEYS[1] record; ARGV: old_request_id, new_request_id; returns 1 if handed over (or already)
local rec = redis.call('HMGET', KEYS[1], 'state', 'owner')
if rec[1] ~= 'inflight' then return 0 end
if rec[2] == ARGV[2] then return 1 end
if rec[2] ~= ARGV[1] then return 0 end
"""
    + _NOW_MS
    + """
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'claimed_at_ms', now)
return 1
"""
)

_RESTORE = """
-- KEYS: record, owner's request marker; ARGV: state, fp, owner, claimed_at_ms, instance, receipt, ttl_ms
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'fp', ARGV[2], 'owner', ARGV[3], 'claimed_at_ms', ARGV[4],
           'instance', ARGV[5], 'nonce', '', 'receipt', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
if ARGV[1] == 'inflight' then redis.call('SET', KEYS[2], 'run', 'NX', 'PX', ARGV[7]) end
return 1
"""


def _record_key(principal: str, digest: str) -> str:
    return f"tg:idem:{{{principal}}}:{digest}"


def _marker_key(principal: str, request_id: str) -> str:
    return f"tg:req:{{{principal}}}:{request_id}"


class RedisIdempotencyStore:
    """:class:`~effectgate.executor.ports.IdempotencyStore` on Redis 6.2+.

    Args:
        redis: an asyncio client with ``decode_responses=False`` (receipts are bytes);
            short socket timeouts (an outage must fail fast).
        timeout_s: upper bound of one store call, seconds.
    """

    def __init__(self, redis: aioredis.Redis, *, timeout_s: float = 1.0) -> None:
        self._redis, self._timeout_s = redis, timeout_s
        self._lock = RebuildLock(redis, "tg:rebuild:idem", EPOCH_KEY)
        self._scripts = {
            name: redis.register_script(text)
            for name, text in (
                ("claim", _CLAIM),
                ("end", _END_REQUEST),
                ("complete", _COMPLETE),
                ("release", _RELEASE),
                ("take_over", _TAKE_OVER),
                ("restore", _RESTORE),
            )
        }

    async def claim(self, request: ClaimRequest) -> Claim:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.claim`.

        Raises:
            IdempotencyStoreUnavailable: Redis unreachable, failing or slower than ``timeout_s``.
            IndexLost: the epoch marker is missing.
            ValueError: ``ttl_s`` is not positive.
        """
        keys = [
            _record_key(request.principal, key_digest(request.idempotency_key)),
            _marker_key(request.principal, request.request_id),
            EPOCH_KEY,
        ]
        args = [request.fingerprint, request.request_id, ttl_ms(request.ttl_s), request.instance, request.nonce]
        return _claim_from_reply(await self._script("claim", keys, args))

    async def end_request(self, principal: str, request_id: str, ttl_s: float) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.end_request`.

        Raises:
            IdempotencyStoreUnavailable, IndexLost: as :meth:`claim`.
        """
        reply = int(await self._script("end", [_marker_key(principal, request_id), EPOCH_KEY], [ttl_ms(ttl_s)]))
        if reply < 0:
            raise IndexLost()
        return reply == 1

    async def complete(
        self, principal: str, idempotency_key: str, request_id: str, receipt: bytes, ttl_s: float
    ) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.complete`."""
        key = _record_key(principal, key_digest(idempotency_key))
        return int(await self._script("complete", [key], [request_id, bytes(receipt), ttl_ms(ttl_s)])) == 1

    async def release(self, principal: str, idempotency_key: str, request_id: str) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.release`."""
        key = _record_key(principal, key_digest(idempotency_key))
        return int(await self._script("release", [key], [request_id])) == 1

    async def take_over(self, principal: str, idempotency_key: str, old_request_id: str, new_request_id: str) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.take_over`."""
        key = _record_key(principal, key_digest(idempotency_key))
        return int(await self._script("take_over", [key], [old_request_id, new_request_id])) == 1

    async def is_alive(self, instance: str) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.is_alive`."""
        return bool(await self._call(self._redis.exists(f"tg:exec:alive:{instance}")))

    async def heartbeat(self, instance: str, ttl_s: float) -> None:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.heartbeat`."""
        await self._call(self._redis.set(f"tg:exec:alive:{instance}", b"1", px=ttl_ms(ttl_s)))

    async def restore(self, principal: str, key_digest: str, record: Restored) -> None:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.restore`."""
        state = "done" if record.receipt is not None else "inflight"
        args = [state, record.fingerprint, record.owner, record.claimed_at_ms, record.instance]
        args += [record.receipt or b"", ttl_ms(record.ttl_s)]
        keys = [_record_key(principal, key_digest), _marker_key(principal, record.owner)]
        await self._script("restore", keys, args)

    async def has_epoch(self) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.has_epoch`."""
        return bool(await self._call(self._redis.exists(EPOCH_KEY)))

    async def set_epoch(self, epoch: str) -> None:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.set_epoch`."""
        await self._call(self._redis.set(EPOCH_KEY, epoch.encode()))

    async def lock_rebuild(self, owner: str, ttl_s: float) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.lock_rebuild`."""
        taken: bool = await self._call(self._lock.take(owner, ttl_s))
        return taken

    async def renew_rebuild(self, owner: str, ttl_s: float) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.renew_rebuild`."""
        held: bool = await self._call(self._lock.renew(owner, ttl_s))
        return held

    async def finish_rebuild(self, owner: str, epoch: str) -> bool:
        """See :meth:`~effectgate.executor.ports.IdempotencyStore.finish_rebuild`."""
        done: bool = await self._call(self._lock.finish(owner, epoch))
        return done

    async def _script(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return await self._call(self._scripts[name](keys=keys, args=args))

    async def _call(self, work: Any) -> Any:
        try:
            async with asyncio.timeout(self._timeout_s):
                return await work
        except (RedisError, OSError, TimeoutError) as exc:
            raise IdempotencyStoreUnavailable(
                "idempotency_store_unavailable", f"idempotency store unavailable: {type(exc).__name__}"
            ) from exc


def _claim_from_reply(reply: list[Any]) -> Claim:
    if _text(reply[0]) == "epoch_lost":
        raise IndexLost()
    state = ClaimState(_text(reply[0]))
    owner = _text(reply[1]) or None
    receipt = _bytes(reply[2]) if state is ClaimState.DONE else None
    claimed_at_ms = int(reply[3]) or None
    return Claim(state, owner, receipt, claimed_at_ms, _text(reply[4]) or None)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")
