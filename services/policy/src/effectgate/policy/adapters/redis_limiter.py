"""GCRA rate limiter in Redis with exactly-once admission: one atomic Lua script per call.

The script reads the bucket's theoretical arrival time (TAT), compares it with Redis's
own ``TIME`` (no client clock skew; safe on Redis >= 5 with effects replication) and
writes the new TAT only when the call fits. Algorithm: the generic cell rate algorithm
(ITU-T I.371; brandur.org "Rate limiting, cells, and GCRA").
"""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from effectgate.contracts.tools.descriptors import RateLimit
from effectgate.policy.domain import LimitDecision, admitted_key, gcra_parameters, limiter_key, no_calls, retry_after_s
from effectgate.policy.errors import LimiterUnavailable

__all__ = ["ADMIT_LUA", "GCRA_LUA", "RedisRateLimiter"]

log = logging.getLogger("effectgate.policy")

GCRA_LUA = """
-- gcra(bucket key, the request's admission marker, emission_interval_us, burst, marker_ttl_ms)
-- returns allowed (0|1), remaining, retry_after_us
local function gcra(bucket, marker, emission, burst, marker_ttl_ms)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local tat = tonumber(redis.call('GET', bucket) or now)
  if tat < now then tat = now end
  local tolerance = emission * burst
  if redis.call('EXISTS', marker) == 1 then
    return 1, math.max(0, math.floor((tolerance - (tat - now)) / emission)), 0
  end
  local new_tat = tat + emission
  if new_tat - tolerance > now then
    return 0, 0, new_tat - tolerance - now
  end
  redis.call('SET', bucket, new_tat, 'PX', math.ceil(tolerance / 1000) + 1)
  redis.call('SET', marker, '1', 'PX', marker_ttl_ms)
  return 1, math.floor((tolerance - (new_tat - now)) / emission), 0
end
"""
"""The GCRA admission (a Lua function), shared by this script and the decision's one script.

A request id is admitted once: its marker makes a second admission take nothing more."""

ADMIT_LUA = (
    GCRA_LUA
    + """
-- KEYS[1] = bucket key, KEYS[2] = the request's admission marker
-- ARGV = emission_interval_us, burst, marker_ttl_ms
-- returns {allowed (0|1), remaining, retry_after_us}
local allowed, remaining, retry_after = gcra(KEYS[1], KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3])
return {allowed, remaining, retry_after}
"""
)
"""GCRA admission in Lua, times in integer microseconds."""


class RedisRateLimiter:
    """Per-principal, per-bucket GCRA limiter on Redis, bucket key ``tg:rl:{<principal>}:<bucket>``.

    Args:
        redis: an asyncio Redis client, ideally with short timeouts.
        timeout_s: upper bound of one :meth:`admit`, seconds.
        admitted_ttl_s: how long an admitted request id is remembered, seconds; keep it
            above the longest time a request can still be decided or re-checked again.
    """

    def __init__(self, redis: aioredis.Redis, *, timeout_s: float = 0.5, admitted_ttl_s: float = 3600.0) -> None:
        self._script = redis.register_script(ADMIT_LUA)
        self._timeout_s, self._marker_ttl_ms = timeout_s, max(1, round(admitted_ttl_s * 1000))

    async def admit(self, principal: str, bucket: str, rate: RateLimit, request_id: str) -> LimitDecision:
        """See :meth:`effectgate.policy.ports.RateLimiter.admit`.

        Returns:
            The decision; a rate allowing no calls limits every call without Redis.

        Raises:
            LimiterUnavailable: Redis failed, answered garbage, or took longer than
                ``timeout_s`` (``reason_code="rate_limiter_unavailable"``).
        """
        parameters = gcra_parameters(rate)
        if parameters is None:
            return no_calls(rate)
        keys = [limiter_key(principal, bucket), admitted_key(principal, request_id)]
        try:
            async with asyncio.timeout(self._timeout_s):
                reply = await self._script(keys=keys, args=[*parameters, self._marker_ttl_ms])
            allowed, remaining, wait_us = (int(value) for value in reply)
        except (RedisError, OSError, TimeoutError, TypeError, ValueError) as exc:
            log.warning("rate limiter store failed: %s: %s", type(exc).__name__, exc)
            raise LimiterUnavailable("the rate limiter's store cannot be reached: denied (fail closed)") from exc
        return LimitDecision(allowed=allowed == 1, remaining=remaining, retry_after_s=retry_after_s(wait_us))
