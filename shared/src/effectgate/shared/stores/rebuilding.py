"""Rebuilding a lost Redis index from the stream: the loop every rebuilt index shares.

An index (the executor's idempotency records, the pending approvals, the spend ledger) declares
itself complete with an epoch marker. When the marker is missing, one instance takes the
rebuild lock, writes back one item per stream event, renews the lock as it goes, and sets the
epoch only if the lock survived (:mod:`effectgate.shared.stores.rebuild_lock`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol, TypeVar

from effectgate.shared.stores.rebuild_lock import LEASE_S

__all__ = ["RENEW_EVERY", "MemoryEpoch", "Rebuildable", "UntilDone", "rebuild"]

T = TypeVar("T")

log = logging.getLogger("effectgate.rebuild")

RENEW_EVERY = 100
"""Stream events read between two renewals of the rebuild lock."""


class Rebuildable(Protocol):
    """An index with an epoch marker and a rebuild lock (see :mod:`effectgate.shared.stores.rebuild_lock`)."""

    async def has_epoch(self) -> bool: ...  # noqa: D102
    async def lock_rebuild(self, owner: str, ttl_s: float) -> bool: ...  # noqa: D102
    async def renew_rebuild(self, owner: str, ttl_s: float) -> bool: ...  # noqa: D102
    async def finish_rebuild(self, owner: str, epoch: str) -> bool: ...  # noqa: D102


async def rebuild(
    index: Rebuildable, events: AsyncIterator[T], restore: Callable[[T], Awaitable[int]], owner: str, what: str
) -> bool:
    """Rebuild ``index`` if its epoch is missing; True when it is complete afterwards.

    Args:
        index: the index.
        events: the stream events to restore from, oldest first.
        restore: writes one event back; returns how many items it restored (0 or 1).
        owner: this instance (holder of the lock).
        what: the index's name in the log, e.g. ``"idempotency index"``.

    Returns ``False`` when another instance holds the lock or the lock was lost (try again).

    Raises:
        whatever ``index``, ``events`` or ``restore`` raise (the store or stream unreachable).
    """
    if await index.has_epoch():
        return True
    if not await index.lock_rebuild(owner, LEASE_S):
        return False
    restored = seen = 0
    async for event in events:
        restored += await restore(event)
        seen += 1
        if seen % RENEW_EVERY == 0 and not await index.renew_rebuild(owner, LEASE_S):
            return _starting_over(what, "its rebuild lock was lost")
    if not await index.finish_rebuild(owner, uuid.uuid4().hex):
        return _starting_over(what, "it changed during its rebuild")
    report = log.warning if restored else log.info  # nothing to restore: a new (or empty) index
    report("%s rebuilt from the stream: %d items restored", what, restored)
    return True


def _starting_over(what: str, why: str) -> bool:
    log.warning("%s: %s (Redis restarted?): starting over", what, why)
    return False


class MemoryEpoch:
    """The epoch marker and rebuild lock of an in-memory index (a test twin of the Redis ones)."""

    def __init__(self) -> None:
        self.epoch: str | None = "test"
        self.lock_owner: str | None = None

    async def has_epoch(self) -> bool:
        """Whether the index is complete."""
        return self.epoch is not None

    async def set_epoch(self, epoch: str) -> None:
        """Declare the index complete."""
        self.epoch = epoch

    async def lock_rebuild(self, owner: str, ttl_s: float) -> bool:
        """Take the rebuild lock; False when someone holds it."""
        if self.lock_owner is not None:
            return False
        self.lock_owner = owner
        return True

    async def renew_rebuild(self, owner: str, ttl_s: float) -> bool:
        """Whether ``owner`` still holds the lock."""
        return self.lock_owner == owner

    async def finish_rebuild(self, owner: str, epoch: str) -> bool:
        """Set the epoch and free the lock if ``owner`` still holds it."""
        if self.lock_owner != owner:
            return False
        self.epoch, self.lock_owner = epoch, None
        return True

    def forget_epoch(self) -> None:
        """Lose the epoch and the lock, as a Redis restarted empty would."""
        self.epoch = self.lock_owner = None


class UntilDone:
    """Runs one rebuild in the background, one at a time, retrying every ``retry_s`` until it succeeds.

    Args:
        attempt: one rebuild; ``True`` when the index is complete, ``False`` to start over.
        what: what is rebuilt, for the task name and the log ("spend ledger").
        retry_s: seconds between attempts.
    """

    def __init__(self, attempt: Callable[[], Awaitable[bool]], what: str, retry_s: float = 1.0) -> None:
        self._attempt, self._what, self._retry_s = attempt, what, retry_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Rebuild now unless a rebuild is already running."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._until_done(), name=f"{self._what} rebuild")

    async def stop(self) -> None:
        """Cancel a running rebuild."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _until_done(self) -> None:
        while True:
            try:
                if await self._attempt():
                    return
            except Exception as error:  # the store or the stream is not reachable yet: keep trying, loudly
                log.warning("%s rebuild not possible yet: %s: %s", self._what, type(error).__name__, error)
            await asyncio.sleep(self._retry_s)
