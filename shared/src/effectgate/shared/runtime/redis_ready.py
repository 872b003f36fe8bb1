"""Readiness of a service's Redis: a background ``PING``, read by ``/readyz`` (:mod:`effectgate.shared.runtime.health`).

A service that cannot reach Redis fails closed (its calls end ``idempotency_store_unavailable``
and the like), so it is not ready either: an orchestrator should route nothing to it.
"""

from __future__ import annotations

import asyncio
import contextlib

from redis.asyncio import Redis

__all__ = ["RedisReachable"]


class RedisReachable:
    """A readiness check (:data:`~effectgate.shared.runtime.health.ReadyCheck`): did Redis answer its last ``PING``?

    The pings start on the first check (from the service's event loop) and repeat every
    ``interval_s``; until the first answer the check says Redis was not checked yet.

    Args:
        client: the Redis client to ping (a connection of its own is best: the service's
            pool may be busy or waiting).
        interval_s: seconds between two pings.
        timeout_s: how long one ping may take, seconds.
    """

    def __init__(self, client: Redis, interval_s: float = 2.0, timeout_s: float = 1.0) -> None:
        self._client, self._interval_s, self._timeout_s = client, interval_s, timeout_s
        self._why: str | None = "Redis was not checked yet"
        self._task: asyncio.Task[None] | None = None

    def __call__(self) -> str | None:
        """``None`` when Redis answered the last ping, else why not."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._ping_forever(), name="redis-ready")
        return self._why

    async def aclose(self) -> None:
        """Stop pinging and close the client."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._client.aclose()

    async def _ping_forever(self) -> None:
        while True:
            self._why = await self._ping()
            await asyncio.sleep(self._interval_s)

    async def _ping(self) -> str | None:
        try:
            async with asyncio.timeout(self._timeout_s):
                await self._client.ping()
        except Exception as error:  # any fault is "not ready", never "ready"
            return f"Redis does not answer ({type(error).__name__})"
        return None
