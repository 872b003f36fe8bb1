"""The spend ledger in Redis: one Lua script reserves, one settles; both check the epoch."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from effectgate.policy.budgets.ledger import BudgetCounter, Charge, Exceeded, Held, RecordState, counter_key, record_key
from effectgate.policy.errors import BudgetsLost, BudgetUnavailable
from effectgate.shared.stores.rebuild_lock import RebuildLock

__all__ = ["CHARGE_LUA", "EPOCH_KEY", "LOCK_KEY", "SETTLE_LUA", "RedisBudgetLedger"]

log = logging.getLogger("effectgate.policy")

T = TypeVar("T")

EPOCH_KEY = "tg:epoch:budgets"
LOCK_KEY = "tg:rebuild:budgets"
_COUNTERS = "tg:budget:{*}:c:*"
_NO_REQUEST = "-"  # a request id no request has (ids match [A-Za-z0-9_-]{1,64} but "-" is never issued)

CHARGE_LUA = """
-- KEYS[1] = epoch, KEYS[2] = the request's record, KEYS[3..] = its counters
-- ARGV[1] = mode ('reserve' | 'check': reserve's test, writing nothing | 'restore'),
-- ARGV[2] = units, ARGV[3] = request id,
-- ARGV[4] = principal, ARGV[5] = record expiry (Unix ms), ARGV[6] = state ('reserved' for a
-- reservation), then per counter: budget, start, window_s, limit, expiry (Unix ms)
-- returns {-1} epoch missing, {2} has a record, {1} charged, {0, counter index, used, reserved}
if ARGV[1] ~= 'restore' and redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {2} end
local units = tonumber(ARGV[2])
if ARGV[1] ~= 'restore' then
  for i = 3, #KEYS do
    local used = tonumber(redis.call('HGET', KEYS[i], 'used') or '0')
    local reserved = tonumber(redis.call('HGET', KEYS[i], 'reserved') or '0')
    if used + reserved + units > tonumber(ARGV[6 + (i - 3) * 5 + 4]) then
      return {0, i - 3, redis.call('HGET', KEYS[i], 'used') or '0', redis.call('HGET', KEYS[i], 'reserved') or '0'}
    end
  end
end
if ARGV[1] == 'check' then return {1} end
local state = ARGV[6]
local counters = {}
for i = 3, #KEYS do
  local at = 6 + (i - 3) * 5
  redis.call('HSET', KEYS[i], 'budget', ARGV[at + 1], 'start', ARGV[at + 2], 'window_s', ARGV[at + 3],
    'limit', ARGV[at + 4], 'principal', ARGV[4])
  redis.call('HSETNX', KEYS[i], 'used', '0')
  redis.call('HSETNX', KEYS[i], 'reserved', '0')
  if state == 'committed' then
    redis.call('HINCRBY', KEYS[i], 'used', ARGV[2])
  else
    redis.call('HINCRBY', KEYS[i], 'reserved', ARGV[2])
  end
  redis.call('HSET', KEYS[i], 'r:' .. ARGV[3], state .. ':' .. ARGV[2])
  redis.call('PEXPIREAT', KEYS[i], ARGV[at + 5])
  counters[#counters + 1] = KEYS[i]
end
redis.call('HSET', KEYS[2], 'state', state, 'units', ARGV[2], 'counters', table.concat(counters, ' '))
redis.call('PEXPIREAT', KEYS[2], ARGV[5])
return {1}
"""
"""Reserve (limits checked) or restore (rebuild: written as found) one request's charge."""

SETTLE_LUA = """
-- KEYS[1] = epoch, KEYS[2] = the request's record
-- ARGV[1] = target state, ARGV[2] = request id, ARGV[3] = an ended record's ttl (ms),
-- ARGV[4] = only from this state ('' for reserved or uncertain), ARGV[5] = '1': no record → an ended one
-- returns {-1, ''} epoch missing, {0, ''} no record, {1, from} moved, {2, state} left as it is
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, ''} end
local state = redis.call('HGET', KEYS[2], 'state')
if not state then
  if ARGV[5] == '1' then
    redis.call('HSET', KEYS[2], 'state', 'ended', 'units', '0', 'counters', '')
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
  end
  return {0, ''}
end
local open = state == 'reserved' or state == 'uncertain'
if not open or state == ARGV[1] or (ARGV[4] ~= '' and state ~= ARGV[4]) then return {2, state} end
local units = redis.call('HGET', KEYS[2], 'units')
for key in string.gmatch(redis.call('HGET', KEYS[2], 'counters') or '', '%S+') do
  if redis.call('EXISTS', key) == 1 then
    if ARGV[1] ~= 'uncertain' then redis.call('HINCRBY', key, 'reserved', '-' .. units) end
    if ARGV[1] == 'committed' then redis.call('HINCRBY', key, 'used', units) end
    redis.call('HSET', key, 'r:' .. ARGV[2], ARGV[1] .. ':' .. units)
  end
end
redis.call('HSET', KEYS[2], 'state', ARGV[1])
return {1, state}
"""
"""Move one request's record (and its counters) to committed, released or uncertain."""


class RedisBudgetLedger:
    """:class:`~effectgate.policy.ports.BudgetLedger` on Redis.

    Args:
        redis: an asyncio Redis client, ideally with short timeouts.
        timeout_s: upper bound of one call, seconds.
        ended_ttl_s: how long an ``ended`` record is kept, seconds (a late admission of
            a request that already has its receipt finds it).
        on_lost: called when the epoch is found missing (start a rebuild).
        epoch_key / lock_key: the epoch marker and rebuild lock (tests use their own).
    """

    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        timeout_s: float = 0.5,
        ended_ttl_s: float = 3600.0,
        on_lost: Callable[[], None] = lambda: None,
        epoch_key: str = EPOCH_KEY,
        lock_key: str = LOCK_KEY,
    ) -> None:
        self._redis, self._timeout_s, self._on_lost = redis, timeout_s, on_lost
        self._ended_ttl_ms, self._epoch_key = max(1, round(ended_ttl_s * 1000)), epoch_key
        self._charge, self._settle = redis.register_script(CHARGE_LUA), redis.register_script(SETTLE_LUA)
        self._lock = RebuildLock(redis, lock_key, epoch_key)

    async def reserve(self, principal: str, request_id: str, units: int, charges: Sequence[Charge]) -> Exceeded | None:
        """See :meth:`~effectgate.policy.ports.BudgetLedger.reserve`."""
        reply = await self._call(self._charge_call("reserve", principal, request_id, units, charges, "reserved"))
        if int(reply[0]) == -1:
            self._lost()
        if int(reply[0]) != 0:
            return None
        return Exceeded(charges[int(reply[1])], int(reply[2]), int(reply[3]))

    async def fits(self, principal: str, units: int, charges: Sequence[Charge]) -> Exceeded | None:
        """See :meth:`~effectgate.policy.ports.BudgetLedger.fits`."""
        reply = await self._call(self._charge_call("check", principal, _NO_REQUEST, units, charges, "reserved"))
        if int(reply[0]) == -1:
            self._lost()
        return Exceeded(charges[int(reply[1])], int(reply[2]), int(reply[3])) if int(reply[0]) == 0 else None

    async def restore(
        self, principal: str, request_id: str, units: int, charges: Sequence[Charge], state: RecordState
    ) -> bool:
        """See :meth:`~effectgate.policy.ports.BudgetLedger.restore`."""
        reply = await self._call(self._charge_call("restore", principal, request_id, units, charges, state.value))
        return int(reply[0]) == 1

    def _charge_call(
        self, mode: str, principal: str, request_id: str, units: int, charges: Sequence[Charge], state: str
    ) -> Awaitable[Any]:
        keys = [self._epoch_key, record_key(principal, request_id)]
        keys += [counter_key(principal, c.budget, c.start_s) for c in charges]
        expiry_ms = max(c.expires_at_s for c in charges) * 1000
        args: list[str | int] = [mode, str(units), request_id, principal, expiry_ms, state]
        for c in charges:
            args += [c.budget, c.start_s, c.window_s, str(c.limit_units), c.expires_at_s * 1000]
        return self._charge(keys=keys, args=args)

    async def settle(
        self,
        principal: str,
        request_id: str,
        to: RecordState,
        *,
        only_from: RecordState | None = None,
        end: bool = True,
    ) -> RecordState | None:
        """See :meth:`~effectgate.policy.ports.BudgetLedger.settle`."""
        keys = [self._epoch_key, record_key(principal, request_id)]
        args = [to.value, request_id, self._ended_ttl_ms, only_from.value if only_from else "", "1" if end else ""]
        code, state = await self._call(self._settle(keys=keys, args=args))
        if int(code) == -1:
            self._lost()
        return None if int(code) == 0 else RecordState(_text(state))

    async def counters(self, cursor: int, count: int) -> tuple[list[BudgetCounter], int]:
        """See :meth:`~effectgate.policy.ports.BudgetLedger.counters` (``SCAN``; a key may come twice)."""

        async def page() -> tuple[list[BudgetCounter], int]:
            if not await self._redis.exists(self._epoch_key):
                self._lost()
            after, keys = await self._redis.scan(cursor, match=_COUNTERS, count=count)
            async with self._redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hgetall(key)
                found = await pipe.execute()
            return [_counter(fields) for fields in found if fields], int(after)

        return await self._call(page())

    async def has_epoch(self) -> bool:
        """Whether the ledger is complete (its epoch marker is set)."""
        return bool(await self._call(self._redis.exists(self._epoch_key)))

    async def lock_rebuild(self, owner: str, ttl_s: float) -> bool:
        """Take the rebuild lock; False when another owner holds it."""
        return await self._call(self._lock.take(owner, ttl_s))

    async def renew_rebuild(self, owner: str, ttl_s: float) -> bool:
        """Renew ``owner``'s rebuild lock; False when it no longer holds it."""
        return await self._call(self._lock.renew(owner, ttl_s))

    async def finish_rebuild(self, owner: str, epoch: str) -> bool:
        """Set the epoch if ``owner`` still holds the rebuild lock."""
        return await self._call(self._lock.finish(owner, epoch))

    def _lost(self) -> None:
        self._on_lost()
        raise BudgetsLost()

    async def _call(self, work: Awaitable[T]) -> T:
        try:
            async with asyncio.timeout(self._timeout_s):
                return await work
        except BudgetsLost:
            raise
        except (RedisError, OSError, TimeoutError, TypeError, ValueError, IndexError) as exc:
            log.warning("budget store failed: %s: %s", type(exc).__name__, exc)
            raise BudgetUnavailable("the budget store cannot be reached: denied (fail closed)") from exc


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _counter(fields: dict[Any, Any]) -> BudgetCounter:
    plain = {_text(k): _text(v) for k, v in fields.items()}
    records = {}
    for name, value in plain.items():
        if name.startswith("r:"):
            state, _, units = value.partition(":")
            records[name[2:]] = Held(state, int(units))
    return BudgetCounter(
        principal=plain["principal"],
        budget=plain["budget"],
        start_s=int(plain["start"]),
        window_s=int(plain["window_s"]),
        limit_units=int(plain["limit"]),
        used_units=int(plain["used"]),
        reserved_units=int(plain["reserved"]),
        records=records,
    )
