"""Approvals in Redis: one JSON value per approval, a sorted set of pending expiries.

Keys: ``tg:approval:<id>`` (the approval JSON as opened, never rewritten),
``tg:approval:<id>:state`` (``pending`` → ``granted``/``rejected``/``expired``), both kept
7 days, and ``tg:approvals:pending`` (score: expiry, epoch seconds). The pending→resolved
transition is one Lua script, so two approvers (or an approver and the expiry sweep) cannot both win.
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
from toolgate.approvals.errors import StoreUnavailable

__all__ = ["RedisApprovalStore"]

T = TypeVar("T")
log = logging.getLogger("toolgate.approvals")
PENDING = "tg:approvals:pending"
KEEP_S = 7 * 24 * 3600

_OPEN = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[3]) then return 0 end
redis.call('SET', KEYS[2], 'pending', 'EX', ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[4])
return 1
"""
"""Opens an approval in one step: it exists whole (listed, answerable, expiring) or not at all."""

_RESOLVE = """
if redis.call('GET', KEYS[1]) ~= 'pending' then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
"""


def _key(approval_id: str) -> str:
    return f"tg:approval:{approval_id}"


def _state_key(approval_id: str) -> str:
    return f"tg:approval:{approval_id}:state"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


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
        self._resolve = redis.register_script(_RESOLVE)
        self._open = redis.register_script(_OPEN)

    async def open(self, pending: PendingApproval) -> bool:  # noqa: D102
        keys = [_key(pending.approval_id), _state_key(pending.approval_id), PENDING]
        args: list[bytes | float | int | str] = [
            msgspec.json.encode(pending),
            pending.expires_at.timestamp(),
            KEEP_S,
            pending.approval_id,
        ]
        return bool(await _safe(self._open(keys=keys, args=args)))

    async def get(self, approval_id: str) -> PendingApproval | None:  # noqa: D102
        raw, state = await _safe(self._redis.mget([_key(approval_id), _state_key(approval_id)]))
        if raw is None or state is None:
            return None
        pending = msgspec.json.decode(raw, type=PendingApproval)
        return msgspec.structs.replace(pending, state=ApprovalState(_text(state)))

    async def list_pending(self) -> list[PendingApproval]:  # noqa: D102
        ids = await _safe(self._redis.zrange(PENDING, 0, -1))
        found = [await self.get(_text(i)) for i in ids]
        return [p for p in found if p is not None and p.state is ApprovalState.PENDING]

    async def resolve(self, approval_id: str, state: ApprovalState) -> bool:  # noqa: D102
        keys = [_state_key(approval_id), PENDING]
        return bool(await _safe(self._resolve(keys=keys, args=[state.value, approval_id])))

    async def due(self, now: datetime) -> list[str]:  # noqa: D102
        ids = await _safe(self._redis.zrangebyscore(PENDING, "-inf", now.timestamp()))
        return [_text(i) for i in ids]
