"""The idempotency store on Redis: one hash per key, changed only by atomic Lua scripts.

Key: ``tg:idem:{<principal>}:<sha256 hex of the idempotency key>`` (the principal is a
Redis Cluster hash tag; the client's key is never put in a key name). Fields: ``state``
(``inflight``/``done``), ``fp``, ``owner``, ``claimed_at_ms`` (Redis ``TIME``, Unix epoch
milliseconds) and ``receipt``. The lease and the retention are the key's ``PEXPIRE``.

The scripts use only ``HMGET``, ``HSET`` (several fields, Redis 4+), ``PEXPIRE`` and
``TIME``, so they run on Redis 6.2+ and Valkey; the pattern follows the IETF
Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header) and Stripe's
semantics. Any Redis or socket error, or a call slower than ``timeout_s``, becomes
:class:`~toolgate.executor.errors.StoreUnavailable`: the executor fails closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from toolgate.executor.errors import StoreUnavailable
from toolgate.executor.ports import Claim, ClaimState, ttl_ms
from toolgate.shared.idempotency import record_key

__all__ = ["RedisIdempotencyStore", "record_key"]

_NOW_MS = "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

_CLAIM = (
    """
-- KEYS[1] record; ARGV: fingerprint, request_id, lease_ms
-- returns {state, owner, receipt, claimed_at_ms}
local rec = redis.call('HMGET', KEYS[1], 'state', 'fp', 'owner', 'receipt', 'claimed_at_ms')
if not rec[1] then
"""
    + _NOW_MS
    + """
  redis.call('HSET', KEYS[1], 'state', 'inflight', 'fp', ARGV[1], 'owner', ARGV[2], 'claimed_at_ms', now)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {'new', ARGV[2], '', now}
end
if rec[2] ~= ARGV[1] then return {'mismatch', rec[3] or '', '', 0} end
return {rec[1], rec[3] or '', rec[4] or '', tonumber(rec[5]) or 0}
"""
)

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

_TAKE_OVER = (
    """
-- KEYS[1] record; ARGV: old_request_id, new_request_id; returns 1 if handed over
local rec = redis.call('HMGET', KEYS[1], 'state', 'owner')
if rec[1] ~= 'inflight' or rec[2] ~= ARGV[1] then return 0 end
"""
    + _NOW_MS
    + """
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'claimed_at_ms', now)
return 1
"""
)


class RedisIdempotencyStore:
    """:class:`~toolgate.executor.ports.IdempotencyStore` on Redis 6.2+.

    Args:
        redis: an asyncio client with ``decode_responses=False`` (receipts are bytes);
            give it short socket timeouts and few retries (an outage must fail fast).
        timeout_s: upper bound of one store call, seconds.
    """

    def __init__(self, redis: aioredis.Redis, *, timeout_s: float = 1.0) -> None:
        self._timeout_s = timeout_s
        self._claim = redis.register_script(_CLAIM)
        self._complete = redis.register_script(_COMPLETE)
        self._take_over = redis.register_script(_TAKE_OVER)

    async def claim(
        self, principal: str, idempotency_key: str, fingerprint: str, request_id: str, ttl_s: float
    ) -> Claim:
        """See :meth:`~toolgate.executor.ports.IdempotencyStore.claim`.

        Raises:
            StoreUnavailable: Redis unreachable, failing or slower than ``timeout_s``.
            ValueError: ``ttl_s`` is not positive.
        """
        args = [fingerprint, request_id, ttl_ms(ttl_s)]
        reply = await self._run(self._claim, record_key(principal, idempotency_key), args)
        return _claim_from_reply(reply)

    async def complete(
        self, principal: str, idempotency_key: str, request_id: str, receipt: bytes, ttl_s: float
    ) -> bool:
        """See :meth:`~toolgate.executor.ports.IdempotencyStore.complete`.

        Raises:
            StoreUnavailable: Redis unreachable, failing or slower than ``timeout_s``.
            ValueError: ``ttl_s`` is not positive.
        """
        args = [request_id, bytes(receipt), ttl_ms(ttl_s)]
        return int(await self._run(self._complete, record_key(principal, idempotency_key), args)) == 1

    async def take_over(self, principal: str, idempotency_key: str, old_request_id: str, new_request_id: str) -> bool:
        """See :meth:`~toolgate.executor.ports.IdempotencyStore.take_over`.

        Raises:
            StoreUnavailable: Redis unreachable, failing or slower than ``timeout_s``.
        """
        args = [old_request_id, new_request_id]
        return int(await self._run(self._take_over, record_key(principal, idempotency_key), args)) == 1

    async def _run(self, script: Any, key: str, args: list[Any]) -> Any:
        try:
            async with asyncio.timeout(self._timeout_s):
                return await script(keys=[key], args=args)
        except (RedisError, OSError, TimeoutError) as exc:
            raise StoreUnavailable(
                "idempotency_store_unavailable", f"idempotency store unavailable: {type(exc).__name__}"
            ) from exc


def _claim_from_reply(reply: list[Any]) -> Claim:
    state = ClaimState(_text(reply[0]))
    owner = _text(reply[1]) or None
    receipt = _bytes(reply[2]) if state is ClaimState.DONE else None
    claimed_at_ms = int(reply[3]) if state is not ClaimState.MISMATCH else None
    return Claim(state, owner, receipt, claimed_at_ms)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")
