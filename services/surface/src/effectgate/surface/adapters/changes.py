"""Registry and policy changes, learnt from NATS by every replica: the trigger of ``tools/list_changed``.

The surface's own NATS user subscribes (core NATS) to the puts of the tools bucket
(``$KV.EFFECTGATE_TOOLS.>``: a tool published, an MCP server's tools changing state) and of the
policy in force (``$KV.EFFECTGATE_POLICY.current``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from nats.aio.client import Client
from nats.aio.msg import Msg

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects

__all__ = ["CHANGE_SUBJECTS", "Changes"]

CHANGE_SUBJECTS = (f"$KV.{catalog.TOOLS_BUCKET}.>", Subjects.POLICY_CURRENT)

log = logging.getLogger("effectgate.surface.changes")


class Changes:
    """Calls ``on_change()`` once per burst of changes.

    Args:
        nc: the surface's own connection.
        on_change: re-lists and notifies (its errors are logged, never raised here).
        settle_s: quiet time before a burst is handled, seconds.
    """

    def __init__(self, nc: Client, on_change: Callable[[], Awaitable[None]], settle_s: float = 0.3) -> None:
        self._nc, self._on_change, self._settle_s = nc, on_change, settle_s
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Subscribe to :data:`CHANGE_SUBJECTS`."""
        for subject in CHANGE_SUBJECTS:
            await self._nc.subscribe(subject, cb=self._heard)

    async def _heard(self, msg: Msg) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(self._settle_s, self._fire)

    def _fire(self) -> None:
        task = asyncio.get_running_loop().create_task(self._run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self) -> None:
        try:
            await self._on_change()
        except Exception:  # a failed refresh must not end the subscription
            log.exception("tool listings not refreshed after a change")
