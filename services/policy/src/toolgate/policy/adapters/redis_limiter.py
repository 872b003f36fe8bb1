"""GCRA rate limiter in Redis: one atomic Lua script per call.

The script reads the key's theoretical arrival time (TAT), compares it with Redis's
own ``TIME`` (no client clock skew; safe on Redis >= 5 with effects replication) and
writes the new TAT only when the call fits. Lua scripts run atomically, so concurrent
calls can never over-admit. Algorithm: the generic cell rate algorithm (ITU-T I.371;
brandur.org "Rate limiting, cells, and GCRA").

Only requests the policy would execute or send to approval reach the limiter: a denied
request never consumes the agent's rate (the request handler decides first).

Any Redis error or timeout raises :class:`LimiterUnavailable`: the caller denies the
request (guarantee 1, docs/architecture.md, fail closed). Give the client short
timeouts and no retries (``socket_timeout=0.2``, ``retry=Retry(NoBackoff(), 0)``);
``timeout_s`` bounds the whole call in any case.
"""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from toolgate.policy.errors import LimiterUnavailable
from toolgate.policy.ports import LimitDecision, gcra_parameters, limiter_key, no_calls
from toolgate.shared.descriptors import RateLimit

__all__ = ["GCRA_LUA", "RedisRateLimiter"]

log = logging.getLogger("toolgate.policy")

GCRA_LUA = """
-- KEYS[1] = limiter key; ARGV = emission_interval_us, burst, cost
-- returns {allowed (0|1), remaining, retry_after_us}
local emission = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local tolerance = emission * burst
local new_tat = tat + emission * cost
if new_tat - tolerance > now then
  return {0, 0, new_tat - tolerance - now}
end
redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil(tolerance / 1000) + 1)
return {1, math.floor((tolerance - (new_tat - now)) / emission), 0}
"""
"""GCRA in Lua, times in integer microseconds."""


class RedisRateLimiter:
    """Per-principal, per-tool GCRA limiter on Redis, key ``tg:rl:{<principal>}:<tool>``.

    Args:
        redis: an asyncio Redis client, ideally with short timeouts and no retries.
        timeout_s: upper bound of one :meth:`acquire`, seconds.
    """

    def __init__(self, redis: aioredis.Redis, *, timeout_s: float = 0.5) -> None:
        self._script = redis.register_script(GCRA_LUA)
        self._timeout_s = timeout_s

    async def acquire(self, principal: str, tool: str, rate: RateLimit) -> LimitDecision:
        """Count one call of ``tool`` by ``principal`` if it fits ``rate``.

        Returns:
            The decision; a rate allowing no calls limits every call without Redis.

        Raises:
            LimiterUnavailable: Redis failed, answered garbage, or took longer than
                ``timeout_s`` (``reason_code="rate_limiter_unavailable"``).
        """
        parameters = gcra_parameters(rate)
        if parameters is None:
            return no_calls(rate)
        emission_us, burst = parameters
        try:
            async with asyncio.timeout(self._timeout_s):
                reply = await self._script(keys=[limiter_key(principal, tool)], args=[emission_us, burst, 1])
            allowed, remaining, retry_after_us = (int(value) for value in reply)
        except (RedisError, OSError, TimeoutError, TypeError, ValueError) as exc:
            log.warning("rate limiter store failed: %s: %s", type(exc).__name__, exc)
            raise LimiterUnavailable("the rate limiter's store cannot be reached: denied (fail closed)") from exc
        return LimitDecision(allowed=allowed == 1, remaining=remaining, retry_after_s=retry_after_us / 1e6)
