"""The replay lookup and the rate admission of a decision in one Lua script (one Redis round trip)."""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from effectgate.contracts.errors import IndexLost
from effectgate.policy.adapters.redis_limiter import GCRA_LUA
from effectgate.policy.domain import LimitDecision, admitted_key, gcra_parameters, limiter_key, no_calls, retry_after_s
from effectgate.policy.errors import PolicyError
from effectgate.policy.pipeline.gate import wants_admission
from effectgate.policy.ports import AdmitAsk, ReplayState, Screened
from effectgate.shared.stores.idempotency import EPOCH_KEY, record_key

__all__ = ["SCREEN_LUA", "RedisReplayGate"]

log = logging.getLogger("effectgate.policy")

SCREEN_LUA = (
    GCRA_LUA
    + """
-- KEYS = epoch marker, idempotency record, rate bucket, the request's admission marker
-- ARGV = request hash, fresh (0|1), replay (0|1), emission_interval_us, burst, marker_ttl_ms
-- returns {-1} without epoch, else {state, fp, asked (0|1), allowed, remaining, retry_after_us}
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local record = redis.call('HMGET', KEYS[2], 'state', 'fp')
local state, fp = record[1] or '', record[2] or ''
local ask = ARGV[2]
if fp ~= '' then
  if fp ~= ARGV[1] then ask = '0' elseif state == 'done' then ask = ARGV[3] end
end
if ask ~= '1' then return {state, fp, 0, 0, 0, 0} end
local allowed, remaining, retry_after = gcra(KEYS[3], KEYS[4], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6])
return {state, fp, 1, allowed, remaining, retry_after}
"""
)
"""Replay lookup + GCRA admission in Lua, times in integer microseconds."""

_UNAVAILABLE = "the idempotency store cannot be reached"


class RedisReplayGate:
    """:class:`~effectgate.policy.ports.ReplayGate` on Redis: one script per decision.

    Args:
        redis: an asyncio Redis client, ideally with short timeouts.
        timeout_s: upper bound of one :meth:`screen`, seconds.
        admitted_ttl_s: how long an admitted request id is remembered, seconds (as
            :class:`~effectgate.policy.adapters.redis_limiter.RedisRateLimiter`).
    """

    def __init__(self, redis: aioredis.Redis, *, timeout_s: float = 0.5, admitted_ttl_s: float = 3600.0) -> None:
        self._script = redis.register_script(SCREEN_LUA)
        self._timeout_s, self._marker_ttl_ms = timeout_s, max(1, round(admitted_ttl_s * 1000))

    async def screen(self, principal: str, idempotency_key: str, request_hash: str, ask: AdmitAsk) -> Screened:
        """See :meth:`~effectgate.policy.ports.ReplayGate.screen`; a rate allowing no calls takes nothing.

        Raises:
            IndexLost: no epoch marker. PolicyError: ``idempotency_store_unavailable``.
        """
        parameters = gcra_parameters(ask.rate)
        flags = ("1" if ask.fresh else "0", "1" if ask.replay else "0") if parameters else ("0", "0")
        keys = [EPOCH_KEY, record_key(principal, idempotency_key)]
        keys += [limiter_key(principal, ask.bucket), admitted_key(principal, ask.request_id)]
        args: list[str | int] = [request_hash, *flags, *(parameters or (0, 0)), self._marker_ttl_ms]
        state, limit = await self._run(keys, args)
        if parameters is None:  # nothing taken: the rate allows no call at all
            return Screened(state, no_calls(ask.rate) if wants_admission(state, request_hash, ask) else None)
        return Screened(state, limit)

    async def _run(self, keys: list[str], args: list[str | int]) -> tuple[ReplayState | None, LimitDecision | None]:
        try:
            async with asyncio.timeout(self._timeout_s):
                reply = await self._script(keys=keys, args=args)
            if len(reply) == 1 and int(reply[0]) == -1:
                raise IndexLost()
            state, fingerprint, *limit = reply
            return _state(state, fingerprint), _limit(limit)
        except (RedisError, OSError, TimeoutError, TypeError, ValueError) as error:
            log.warning("idempotency store failed: %s: %s", type(error).__name__, error)
            raise PolicyError("idempotency_store_unavailable", _UNAVAILABLE) from None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _state(state: object, fingerprint: object) -> ReplayState | None:
    fp = _text(fingerprint)
    return ReplayState(done=_text(state) == "done", fingerprint=fp) if fp else None


def _limit(values: list[object]) -> LimitDecision | None:
    asked, allowed, remaining, wait_us = (int(_text(v)) for v in values)
    if not asked:
        return None
    return LimitDecision(allowed=allowed == 1, remaining=remaining, retry_after_s=retry_after_s(wait_us))
