"""Background upkeep of one executor instance: its heartbeat and the index rebuild.

The heartbeat (``tg:exec:alive:<instance>``, renewed every ``heartbeat_every_s`` with a
lifetime of ``alive_for_s``) lets another delivery tell a run that is still going from one
whose executor died: a dead owner's write ends ``uncertain`` at once instead of after its
timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable
from datetime import datetime

from effectgate.executor.background.rebuild import rebuild_index
from effectgate.executor.errors import ExecutorError
from effectgate.executor.ports import Bus, IdempotencyStore

__all__ = ["Lease", "Upkeep"]

log = logging.getLogger("effectgate.executor")


class Lease:
    """This instance's own view of its heartbeat: held while its last beat is younger than ``valid_s``.

    Another executor declares this one dead once its heartbeat key expires (``alive_for_s``),
    and may then end its runs ``uncertain``. An instance that was paused (SIGSTOP, a long
    GC, a starved host) must not make an effect after that: it asks :meth:`held` right
    before one, and ``valid_s`` is shorter than the heartbeat's lifetime.

    Args:
        valid_s: seconds a successful beat keeps the lease, below the heartbeat's lifetime.
        clock: monotonic seconds (it keeps counting while the process is stopped).
    """

    def __init__(self, valid_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._valid_s, self._clock, self._last = valid_s, clock, -math.inf

    def renewed(self) -> None:
        """A heartbeat was stored just now."""
        self._last = self._clock()

    def held(self) -> bool:
        """Whether the last stored heartbeat is recent enough to act on."""
        return self._clock() - self._last < self._valid_s


class Upkeep:
    """Heartbeat and index rebuild tasks of one executor instance.

    Args:
        store: the idempotency index.
        bus: the stream (claims and receipts, for the rebuild).
        clock: current UTC time.
        instance: this executor instance's id.
        ttl_s: idempotency retention, seconds.
        heartbeat_every_s / alive_for_s: heartbeat period and lifetime, seconds.
        lease: the lease every stored heartbeat renews (default: one valid for
            ``alive_for_s - 2 * heartbeat_every_s``).

    Attributes:
        lease: this instance's :class:`Lease`, renewed by every stored heartbeat.
    """

    def __init__(
        self,
        store: IdempotencyStore,
        bus: Bus,
        clock: Callable[[], datetime],
        instance: str,
        ttl_s: float,
        heartbeat_every_s: float = 1.0,
        alive_for_s: float = 5.0,
        lease: Lease | None = None,
    ) -> None:
        self._store, self._bus, self._clock, self._instance, self._ttl_s = store, bus, clock, instance, ttl_s
        self._every_s, self._alive_s = heartbeat_every_s, alive_for_s
        self.lease = lease or Lease(valid_s=alive_for_s - 2 * heartbeat_every_s)
        self._tasks: list[asyncio.Task[None]] = []
        self._rebuild: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the heartbeat and a first rebuild check."""
        self._tasks.append(asyncio.create_task(self._beat(), name="executor-heartbeat"))
        self.index_lost()

    def index_lost(self) -> None:
        """Rebuild the index now unless a rebuild is already running."""
        if self._rebuild is None or self._rebuild.done():
            self._rebuild = asyncio.create_task(self._rebuild_until_done(), name="executor-rebuild")

    async def stop(self) -> None:
        """Cancel the background tasks."""
        tasks = [*self._tasks, *([self._rebuild] if self._rebuild else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _beat(self) -> None:
        """Renew the heartbeat; notice a lost index even when no claim is being made."""
        while True:
            with contextlib.suppress(ExecutorError):
                await self._store.heartbeat(self._instance, self._alive_s)
                self.lease.renewed()
                if not await self._store.has_epoch():
                    self.index_lost()
            await asyncio.sleep(self._every_s)

    async def _rebuild_until_done(self) -> None:
        while True:
            try:
                if await rebuild_index(self._store, self._bus, self._clock, self._instance, self._ttl_s):
                    return
            except Exception as error:  # the store or the stream is not reachable yet: keep trying, loudly
                log.warning("index rebuild not possible yet: %s: %s", type(error).__name__, error)
            await asyncio.sleep(1.0)
