"""Approvals in Redis: one JSON value per approval, its life in side keys, a sorted set of pending expiries.

Keys and scripts: :mod:`effectgate.approvals.adapters.redis_scripts`. ``tg:approvals:pending``
(score: expiry, epoch seconds) lists what is pending; ``tg:epoch:approvals`` is present once
the store is complete.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable
from datetime import datetime
from typing import Any, TypeVar

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from effectgate.approvals.adapters import redis_scripts as lua
from effectgate.approvals.domain import ApprovalState, PendingApproval
from effectgate.approvals.errors import ApprovalStoreUnavailable, store_lost
from effectgate.approvals.ports import VoteResult, VoteStatus
from effectgate.shared.stores.rebuild_lock import RebuildLock

__all__ = ["RedisApprovalStore"]

T = TypeVar("T")
log = logging.getLogger("effectgate.approvals")
PENDING = "tg:approvals:pending"
EPOCH = "tg:epoch:approvals"
KEEP_S = 7 * 24 * 3600


def _key(approval_id: str, part: str = "") -> str:
    return f"tg:approval:{approval_id}" + (f":{part}" if part else "")


def _index(request_hash: str) -> str:
    return f"tg:approvals:hash:{request_hash.removeprefix('sha256:')}"


def _key_digest(pending: PendingApproval) -> str:
    key = pending.idempotency_key
    return "" if key is None else hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _checked(reply: object) -> int:
    value = int(str(reply))
    if value < 0:
        raise store_lost()
    return value


def _vote_result(reply: list[Any]) -> VoteResult:
    status, *rest = [_text(item) for item in reply]
    if status == "index_lost":
        raise store_lost()
    state, votes = rest[0], tuple(rest[1:])
    return VoteResult(VoteStatus(status), ApprovalState(state) if state else None, votes)


async def _safe(work: Awaitable[T]) -> T:
    try:
        return await work
    except (RedisError, OSError) as error:
        log.warning("approval store failed: %s", error)
        raise ApprovalStoreUnavailable("approval_store_unavailable", "the approval store cannot be reached") from error


class RedisApprovalStore:
    """:class:`~effectgate.approvals.ports.ApprovalStore` on Redis."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._lock = RebuildLock(redis, "tg:rebuild:approvals", EPOCH)
        self._open_script = redis.register_script(lua.OPEN)
        self._vote = redis.register_script(lua.VOTE)
        self._withdraw = redis.register_script(lua.WITHDRAW)
        self._resolve = redis.register_script(lua.RESOLVE)
        self._restore_join = redis.register_script(lua.RESTORE_JOIN)

    async def open(self, pending: PendingApproval, now: datetime) -> str:  # noqa: D102
        return await self._open(pending, now.timestamp(), check_epoch=True)

    async def restore(self, pending: PendingApproval) -> None:  # noqa: D102
        await self._open(msgspec.structs.replace(pending, votes=()), 0.0, check_epoch=False)
        if pending.votes:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(_key(pending.approval_id, "votes"), _key(pending.approval_id, "vote-tokens"))
                pipe.rpush(_key(pending.approval_id, "votes"), *pending.votes)
                pipe.hset(_key(pending.approval_id, "vote-tokens"), mapping=dict.fromkeys(pending.votes, "restored"))
                pipe.expire(_key(pending.approval_id, "votes"), KEEP_S)
                pipe.expire(_key(pending.approval_id, "vote-tokens"), KEEP_S)
                await _safe(pipe.execute())

    async def _open(self, pending: PendingApproval, now_s: float, *, check_epoch: bool) -> str:
        opened = msgspec.structs.replace(pending, state=ApprovalState.PENDING, joined=(), related=())
        keys = [_key(pending.approval_id), _key(pending.approval_id, "state"), PENDING, EPOCH]
        keys += [_index(pending.request_hash), _key(pending.approval_id, "joined-to")]
        args: list[bytes | float | int | str] = [msgspec.json.encode(opened), pending.expires_at.timestamp(), KEEP_S]
        args += [pending.approval_id, "1" if check_epoch else "0", _key_digest(pending), now_s, pending.request_id]
        args += ["1" if check_epoch else "0"]  # a rebuild restores what was, it joins nothing
        code, approval_id = await _safe(self._open_script(keys=keys, args=args))
        _checked(code)
        return _text(approval_id)

    async def restore_join(self, approval_id: str, request_id: str, own_id: str) -> None:  # noqa: D102
        keys = [_key(approval_id, "joined"), _key(own_id, "joined-to")]
        await _safe(self._restore_join(keys=keys, args=[request_id, approval_id, KEEP_S]))

    async def get(self, approval_id: str) -> PendingApproval | None:  # noqa: D102
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.exists(EPOCH)
            pipe.mget([_key(approval_id), _key(approval_id, "state"), _key(approval_id, "answerer")])
            pipe.lrange(_key(approval_id, "votes"), 0, -1)
            pipe.lrange(_key(approval_id, "joined"), 0, -1)
            epoch, (raw, state, answerer), votes, joined = await _safe(pipe.execute())
        if not epoch:
            raise store_lost()
        if raw is None or state is None:
            return None
        return msgspec.structs.replace(
            msgspec.json.decode(raw, type=PendingApproval),
            state=ApprovalState(_text(state)),
            votes=tuple(_text(v) for v in votes),
            joined=tuple(_text(j) for j in joined),
            answered_by=None if answerer is None else _text(answerer),
        )

    async def answering(self, own_id: str) -> str | None:  # noqa: D102
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.exists(EPOCH)
            pipe.mget([_key(own_id), _key(own_id, "joined-to")])
            epoch, (raw, joined_to) = await _safe(pipe.execute())
        if epoch == 0:  # no epoch marker: the store lost its state
            raise store_lost()
        if raw is not None:
            return own_id
        return None if joined_to is None else _text(joined_to)

    async def list_pending(self) -> list[PendingApproval]:  # noqa: D102
        ids = await _safe(self._redis.zrange(PENDING, 0, -1))
        found = [await self.get(_text(i)) for i in ids]
        if not ids and not await self.has_epoch():
            raise store_lost()
        return [p for p in found if p is not None and p.state is ApprovalState.PENDING]

    async def pending_index(self) -> list[tuple[float, str]]:  # noqa: D102
        scored: list[Any] = await _safe(self._redis.zrange(PENDING, 0, -1, withscores=True))
        if not scored and not await self.has_epoch():
            raise store_lost()
        return [(float(pair[1]), _text(pair[0])) for pair in scored]

    async def same_request(self, request_hash: str) -> list[PendingApproval]:  # noqa: D102
        ids = await _safe(self._redis.hkeys(_index(request_hash)))
        found = [await self.get(_text(i)) for i in ids]
        return [p for p in found if p is not None]

    async def vote(self, approval_id: str, approver: str, required: int, token: str) -> VoteResult:  # noqa: D102
        keys = [_key(approval_id, "state"), PENDING, _key(approval_id, "by"), EPOCH, _key(approval_id, "votes")]
        keys += [_key(approval_id, "vote-tokens"), _key(approval_id, "answerer")]
        reply = await _safe(self._vote(keys=keys, args=[approver, required, token, KEEP_S, approval_id]))
        return _vote_result(reply)

    async def withdraw(self, approval_id: str, approver: str) -> VoteResult:  # noqa: D102
        keys = [_key(approval_id, "state"), PENDING, _key(approval_id, "by"), EPOCH]
        keys += [_key(approval_id, "votes"), _key(approval_id, "vote-tokens")]
        return _vote_result(await _safe(self._withdraw(keys=keys, args=[approver])))

    async def resolve(  # noqa: D102
        self, approval_id: str, state: ApprovalState, token: str, answerer: str | None = None
    ) -> bool:
        keys = [_key(approval_id, "state"), PENDING, _key(approval_id, "by"), EPOCH, _key(approval_id, "answerer")]
        args = [state.value, approval_id, token, KEEP_S, answerer or ""]
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
