"""One held call's ``notifications/progress``: the surface's own while it waits, and a streaming call's items.

Both share the call's progress token, and the spec (MCP 2025-06-18 and 2025-11-25, "Progress")
wants each notification's ``progress`` above the last. So ``progress`` counts the items heard
so far (:class:`~effectgate.contracts.tools.hosting.CallProgress`, relayed by the executor):
an item notification sends the count, a wait notification the count plus a fraction below 1
that grows while the call is held. At most one notification goes out per :data:`MIN_GAP_S`
(an item count heard sooner goes out when the gap ends, with the latest count); none once
:meth:`Reporter.close` returned, so none after the call's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import anyio

__all__ = ["MIN_GAP_S", "Reporter", "Send"]

log = logging.getLogger("effectgate.surface.progress")

MIN_GAP_S = 0.1
"""The least time between two progress notifications of one call, seconds (at most ~10 a second)."""

Send = Callable[[float, str], Awaitable[None]]
"""``send(progress, message)``: one ``notifications/progress`` to the client."""


class Reporter:
    """The progress notifications of one call (module docstring).

    Args:
        send: what sends one notification.
        hold_s: the longest the call is held, seconds (the scale of the wait fraction).
        gap_s: :data:`MIN_GAP_S`.
    """

    def __init__(self, send: Send, hold_s: float, gap_s: float = MIN_GAP_S) -> None:
        self._send, self._hold_s, self._gap_s = send, hold_s, gap_s
        self._items, self._message, self._last, self._sent_at = 0, "", -1.0, -gap_s
        self._open, self._lock = True, anyio.Lock()
        self._later: asyncio.Task[None] | None = None

    async def heard(self, items: int, message: str) -> None:
        """A streaming call's progress: ``items`` so far, the tool's ``message`` (a count not above the last: none)."""
        if items <= self._items:
            return
        self._items, self._message = items, message
        wait_s = self._sent_at + self._gap_s - time.monotonic()
        if wait_s <= 0:
            await self._out(float(items), message)
        elif self._later is None:  # the latest count, once the gap ended
            self._later = asyncio.get_running_loop().create_task(self._after(wait_s))

    async def _after(self, wait_s: float) -> None:
        await asyncio.sleep(wait_s)
        self._later = None
        await self._out(float(self._items), self._message)

    async def waited(self, elapsed_s: float, message: str) -> None:
        """The surface's own notification of a call held ``elapsed_s`` seconds."""
        await self._out(self._items + elapsed_s / (elapsed_s + self._hold_s), message)

    async def close(self) -> None:
        """Send nothing more; returns once a notification being sent went out."""
        self._open = False
        later, self._later = self._later, None
        if later is not None:
            later.cancel()
        with anyio.CancelScope(shield=True):
            if later is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await later
            async with self._lock:
                pass

    async def _out(self, progress: float, message: str) -> None:
        async with self._lock:
            if not self._open or progress <= self._last or time.monotonic() - self._sent_at < self._gap_s:
                return
            self._last, self._sent_at = progress, time.monotonic()
            try:
                await self._send(progress, message)
            except Exception as error:  # a client gone: the call still ends with its result
                log.info("progress not sent: %s", type(error).__name__)
                self._open = False
