"""Approvals in Redis: one JSON value per approval, a sorted set of pending expiries.

Keys: ``tg:approval:<id>`` (the approval JSON as opened, never rewritten),
``tg:approval:<id>:state`` (``pending`` → ``granted``/``rejected``/``expired``) and
``tg:approval:<id>:by`` (the resolving call's token), kept 7 days; ``tg:approvals:pending``
(score: expiry, epoch seconds); ``tg:epoch:approvals``, present once the store is complete.
The pending→resolved transition is one Lua script, so two approvers (or an approver and the
expiry sweep) cannot both win, and the same call retried after a broken connection wins
again (its token). Every operation first checks the epoch marker: a Redis that restarted
empty answers :class:`~toolgate.approvals.errors.IndexLost` until the approvals are rebuilt
from the stream.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from datetime import datetime
from typing import TypeVar

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from toolgate.approvals.domain import ApprovalState, PendingApproval
from toolgate.approvals.errors import IndexLost, StoreUnavailable
from toolgate.shared.rebuild_lock import RebuildLock

__all__ = ["RedisApprovalStore"]

T = TypeVar("T")
log = logging.getLogger("toolgate.approvals")
PENDING = "tg:approvals:pending"
EPOCH = "tg:epoch:approvals"
KEEP_S = 7 * 24 * 3600

_OPEN = """
-- KEYS: approval, state, pending set, epoch; ARGV: json, expiry, keep_s, id, check_epoch
if ARGV[5] == '1' and redis.call('EXISTS', KEYS[4]) == 0 then return -1 end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[3]) then return 0 end
redis.call('SET', KEYS[2], 'pending', 'EX', ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[4])
return 1
"""
"""Opens an approval in one step: it exists whole (listed, answerable, expiring) or not at all."""

_RESOLVE = """
-- KEYS: state, pending set, resolver token, epoch; ARGV: new state, id, token, keep_s
if redis.call('EXISTS', KEYS[4]) == 0 then return -1 end
local state = redis.call('GET', KEYS[1])
if state == ARGV[1] and redis.call('GET', KEYS[3]) == ARGV[3] then return 1 end
if state ~= 'pending' then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
redis.call('SET', KEYS[3], ARGV[3], 'EX', ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
"""


def _key(approval_id: str) -> str:
    return f"tg:approval:{approval_id}"


def _state_key(approval_id: str) -> str:
    return f"tg:approval:{approval_id}:state"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _checked(reply: object) -> int:
    value = int(str(reply))
    if value < 0:
        raise IndexLost()
    return value


async def _safe(work: Awaitable[T]) -> T:
    try:
        return await work
    except (RedisError, OSError) as error:
        log.warning("approval store failed: %s", error)
        raise StoreUnavailable("approval_store_unavailable", "the approval store cannot be reached") from error


class RedisApprovalStore:
    """:class:`~toolgate.approvals.ports.ApprovalStore` on Redis."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._lock = RebuildLock(redis, "tg:rebuild:approvals", EPOCH)
        self._resolve = redis.register_script(_RESOLVE)
        self._open_script = redis.register_script(_OPEN)

    async def open(self, pending: PendingApproval) -> bool:  # noqa: D102
        return await self._open(pending, check_epoch=True)

    async def restore(self, pending: PendingApproval) -> None:  # noqa: D102
        await self._open(pending, check_epoch=False)

    async def _open(self, pending: PendingApproval, *, check_epoch: bool) -> bool:
        keys = [_key(pending.approval_id), _state_key(pending.approval_id), PENDING, EPOCH]
        args: list[bytes | float | int | str] = [
            msgspec.json.encode(pending),
            pending.expires_at.timestamp(),
            KEEP_S,
            pending.approval_id,
            "1" if check_epoch else "0",
        ]
        return bool(_checked(await _safe(self._open_script(keys=keys, args=args))))

    async def get(self, approval_id: str) -> PendingApproval | None:  # noqa: D102
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.exists(EPOCH)
            pipe.mget([_key(approval_id), _state_key(approval_id)])
            epoch, (raw, state) = await _safe(pipe.execute())
        if not epoch:
            raise IndexLost()
        if raw is None or state is None:
            return None
        pending = msgspec.json.decode(raw, type=PendingApproval)
        return msgspec.structs.replace(pending, state=ApprovalState(_text(state)))

    async def list_pending(self) -> list[PendingApproval]:  # noqa: D102
        ids = await _safe(self._redis.zrange(PENDING, 0, -1))
        found = [await self.get(_text(i)) for i in ids]
        if not ids and not await self.has_epoch():
            raise IndexLost()
        return [p for p in found if p is not None and p.state is ApprovalState.PENDING]

    async def resolve(self, approval_id: str, state: ApprovalState, token: str) -> bool:  # noqa: D102
        keys = [_state_key(approval_id), PENDING, f"{_key(approval_id)}:by", EPOCH]
        args = [state.value, approval_id, token, KEEP_S]
        return bool(_checked(await _safe(self._resolve(keys=keys, args=args))))

    async def due(self, now: datetime) -> list[str]:  # noqa: D102
        ids = await _safe(self._redis.zrangebyscore(PENDING, "-inf", now.timestamp()))
        return [_text(i) for i in ids]

    async def has_epoch(self) -> bool:  # noqa: D102
        return bool(await _safe(self._redis.exists(EPOCH)))

    async def set_epoch(self, epoch: str) -> None:  # noqa: D102
        await _safe(self._redis.set(EPOCH, epoch))

    async def lock_rebuild(self, owner: str, ttl_s: float) -> bool:  # noqa: D102
        return await _safe(self._lock.take(owner, ttl_s))

    async def renew_rebuild(self, owner: str, ttl_s: float) -> bool:  # noqa: D102
        return await _safe(self._lock.renew(owner, ttl_s))

    async def finish_rebuild(self, owner: str, epoch: str) -> bool:  # noqa: D102
        return await _safe(self._lock.finish(owner, epoch))
