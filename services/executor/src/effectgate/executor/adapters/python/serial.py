"""One call at a time, across every executor replica, for operations declared ``concurrency_safe=False``.

A Redis lock (redis-py's :class:`~redis.asyncio.lock.Lock`: ``SET NX PX`` with a random token,
released by a Lua script only by its holder) at ``tg:serial:{<tool>}[:<sha256 of the
serialize_by value>]``, held for the call, leased for its timeout plus :data:`LEASE_MARGIN_S`
(so a lock an executor died holding frees itself). A call that ended without its worker's answer
(none in time, an unreadable one, the call cancelled) keeps the lock until the lease ends: its
worker may still be running it (a sync tool's thread outlives its deadline). Fail closed: a Redis
that cannot be reached refuses the call ``serialization_unavailable``; nothing runs unlocked.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import LockError, RedisError

from effectgate.contracts.integrity.canonical import sha256_hex
from effectgate.contracts.tools.descriptors import OperationSpec
from effectgate.contracts.tools.pointers import MISSING, resolve
from effectgate.executor.errors import ExecutorError, ToolRefused

__all__ = ["LEASE_MARGIN_S", "Held", "Serializer", "lock_key"]

log = logging.getLogger("effectgate.executor")

LEASE_MARGIN_S = 5.0
"""How much longer than the call's timeout a lock is leased, seconds."""


def lock_key(tool: str, spec: OperationSpec, arguments: Mapping[str, Any]) -> str:
    """The lock of a call: the tool's, or the tool's for its ``serialize_by`` value (hashed; absent: one key)."""
    if spec.serialize_by is None:
        return f"tg:serial:{{{tool}}}"
    value = resolve(spec.serialize_by, arguments)
    digest = "absent" if value is MISSING else sha256_hex(value).removeprefix("sha256:")
    return f"tg:serial:{{{tool}}}:{digest}"


@dataclass
class Held:
    """A lock held for one call; :meth:`keep` leaves it to its lease instead of releasing it."""

    kept: bool = False

    def keep(self) -> None:
        """The worker may still run the call: release nothing, the lease ends the lock."""
        self.kept = True


class Serializer:
    """Takes the lock of a non-concurrent call (module doc).

    Args:
        redis: the executor's Redis client (short timeouts: an outage fails fast).
    """

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis

    @asynccontextmanager
    async def held(self, key: str, lease_s: float, wait_s: float, where: str) -> AsyncIterator[Held]:
        """Hold ``key`` for the block, leased ``lease_s`` seconds, waiting at most ``wait_s`` for it.

        Released when the block ends, unless it called :meth:`Held.keep` or ended by anything but
        an :class:`ExecutorError` (cancelled, crashed): then only the lease frees it.

        Raises:
            ToolRefused: ``serialization_unavailable`` (Redis unreachable), ``tool_busy`` (another
                call held it for all of ``wait_s``); ``where`` begins the reason. Nothing ran.
        """
        lock = self._redis.lock(key, timeout=lease_s, blocking_timeout=max(wait_s, 0.0), thread_local=False)
        try:
            taken = await lock.acquire()
        except RedisError as error:
            reason = f"{where}: its serialization lock cannot be taken ({type(error).__name__}); nothing ran"
            raise ToolRefused("serialization_unavailable", reason) from None
        if not taken:
            raise ToolRefused("tool_busy", f"{where}: another call held its serialization lock for {wait_s:.1f}s")
        held = Held()
        try:
            yield held
        except BaseException as error:
            if not isinstance(error, ExecutorError):
                held.keep()
            raise
        finally:
            if held.kept:
                log.warning("%s: its call ended unanswered; its lock %s is left to its lease", where, key)
            else:
                await _release(lock, key)


async def _release(lock: Any, key: str) -> None:
    try:
        await lock.release()
    except (LockError, RedisError) as error:  # lost or unreachable: the lease frees it
        log.warning("the serialization lock %s was not released: %r", key, error)
