"""Announces each change of an MCP server's state on the bus, in order, scrubbed of secrets.

The wardens (:mod:`effectgate.executor.adapters.mcp.warden`) report a change synchronously
(:meth:`StateAnnouncer.note`); one task publishes them in order as
:class:`~effectgate.contracts.events.ToolStateChanged` on ``tg.tool.state.mcp_<server>``. A
reason may quote a server's stderr: it is scrubbed by the executor's redactor first.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import timedelta

from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ToolStateChanged
from effectgate.contracts.tools.tool_states import ToolState
from effectgate.executor.adapters.mcp.warden import DEGRADED, ServerState
from effectgate.shared.secrets.redaction import Redactor
from effectgate.shared.stores.stream import publish_event

__all__ = ["StateAnnouncer", "state_event"]

log = logging.getLogger("effectgate.executor")


def state_event(server: str, state: ServerState, redactor: Redactor, cool_down_s: float) -> ToolStateChanged:
    """The event announcing ``state`` of ``server``; a degraded one names when its probe is let through."""
    probe_at = state.since + timedelta(seconds=cool_down_s) if state.state == DEGRADED else None
    return ToolStateChanged(
        event_id=f"tool-state:{server}:{uuid.uuid4().hex}",
        occurred_at=state.since,
        tool=f"mcp_{server}",
        server=server,
        state=ToolState(state=state.state, reason=redactor.text(state.reason), since=state.since, probe_at=probe_at),
    )


class StateAnnouncer:
    """Publishes noted state changes, one at a time, in the order they were noted.

    Args:
        redactor: the executor's secret rules (reasons are scrubbed).
        cool_down_s: the circuit breaker's cool-down, seconds (gives ``probe_at``).
    """

    def __init__(self, redactor: Redactor, cool_down_s: float) -> None:
        self._redactor, self._cool_down_s = redactor, cool_down_s
        self._queue: asyncio.Queue[ToolStateChanged] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def note(self, server: str, state: ServerState) -> None:
        """Queue the announcement of ``server``'s new state (never blocks)."""
        self._queue.put_nowait(state_event(server, state, self._redactor, self._cool_down_s))

    def start(self, js: JetStreamContext) -> None:
        """Start publishing on ``js``, the queued announcements first."""
        if self._task is None:
            self._task = asyncio.create_task(self._publish_all(js), name="mcp-state-announcer")

    async def stop(self) -> None:
        """Stop publishing (what is still queued is dropped)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _publish_all(self, js: JetStreamContext) -> None:
        while True:
            event = await self._queue.get()
            try:
                await publish_event(js, Subjects.tool_state(event.tool), event)
            except Exception as error:  # a lost announcement must not stop the next ones
                log.warning("the state of %s could not be announced: %r", event.tool, error)
