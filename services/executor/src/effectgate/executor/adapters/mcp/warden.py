"""Keeps one MCP server warm: started at start-up, restarted with capped backoff, its state known."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

import msgspec

from effectgate.executor.adapters.mcp.breaker import Breaker, Circuit
from effectgate.executor.errors import ExecutorError, ToolFailed, ToolRefused

if TYPE_CHECKING:  # the MCP client stack is imported where a session is made (mcp_client), not here
    from effectgate.executor.adapters.mcp.session import McpSession

__all__ = ["FIRST_DELAY_S", "HEALTHY_S", "MAX_DELAY_S", "Backoff", "ServerState", "Warden"]

ANSWERED = frozenset({"tool_error", "output_invalid"})
"""Reason codes of calls the server answered (its tool's error, a result breaking the tool's schema): no fault
of the server's, so they never open its circuit, whose faults are silence, lost connections and broken replies."""

log = logging.getLogger("effectgate.executor")

FIRST_DELAY_S: Final = 0.5
"""Delay before the first restart of a server, seconds."""

MAX_DELAY_S: Final = 30.0
"""Longest delay between restarts, seconds."""

HEALTHY_S: Final = 10.0
"""How long a connection must have served for the next restart to wait :data:`FIRST_DELAY_S` again, seconds."""

STARTING, READY, UNAVAILABLE, DEGRADED = "starting", "ready", "unavailable", "degraded"

FIRST_START: Final = "its first start is under way"
"""The reason of a server ``starting``: a call to it is refused saying so, never with an empty reason."""


class ServerState(msgspec.Struct, frozen=True, kw_only=True):
    """Where one MCP server stands.

    Attributes:
        state: ``starting``, ``ready``, ``unavailable`` or ``degraded``.
        reason: why (:data:`FIRST_START` when ``starting``); never a secret the scrubbing has not seen.
        since: when it entered this state, UTC.
    """

    state: str
    reason: str = ""
    since: datetime


@dataclass(frozen=True)
class Backoff:
    """The delays between a server's restarts (see the module's doc).

    Attributes:
        first_s: the first delay, and the delay after a connection that served ``healthy_s``, seconds.
        max_s: the longest delay, seconds.
        healthy_s: how long a connection must serve for the delay to go back to ``first_s``, seconds.
    """

    first_s: float = FIRST_DELAY_S
    max_s: float = MAX_DELAY_S
    healthy_s: float = HEALTHY_S

    def after(self, delay_s: float | None, served_s: float) -> float:
        """The next delay, seconds: the last was ``delay_s`` (``None``: none yet), then it served ``served_s``."""
        if delay_s is None or served_s >= self.healthy_s:
            return self.first_s
        return min(delay_s * 2, self.max_s)


class Warden:
    """One server's keeper: its restarts, its circuit, its state.

    Args:
        session: the server's connections.
        breaker: its circuit breaker.
        on_change: called with ``(server, state)`` at each change of state (must not block).
        backoff: the delays between restarts (default: :class:`Backoff`'s).
        sleep: how a delay is waited (a test records them).
    """

    def __init__(
        self,
        session: McpSession,
        breaker: Breaker,
        on_change: Callable[[str, ServerState], None] | None = None,
        backoff: Backoff | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.name = session.config.name
        self._session, self._breaker, self._on_change = session, breaker, on_change
        self._backoff, self._sleep = backoff or Backoff(), sleep
        self._life = ServerState(state=STARTING, reason=FIRST_START, since=_utc())
        self.state = self._life
        self.settled = asyncio.Event()
        self._opened_why = ""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start keeping the server warm (idempotent); its ``starting`` state is reported at once."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"mcp-warden-{self.name}")
            if self._on_change is not None:
                self._on_change(self.name, self.state)

    async def stop(self) -> None:
        """Stop restarting the server (its connections are stopped by the session)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    @contextlib.contextmanager
    def watched(self) -> Iterator[None]:
        """Admit one call, or refuse it now; count how it ends in the circuit.

        Raises:
            ToolRefused: ``tool_unavailable``, the server is not ready or its circuit is open.
        """
        self._admit()
        try:
            yield
        except ToolRefused:
            self._breaker.neutral()
            raise
        except ExecutorError as error:
            if error.reason_code in ANSWERED:
                self._breaker.neutral()  # the server answered: its tool's own error says nothing of its health
            else:
                self._fault(error)
            raise
        except BaseException:
            self._breaker.neutral()
            raise
        if self._breaker.succeeded():
            self._changed("its probe call succeeded")

    def _admit(self) -> None:
        if self._life.state != READY:
            raise ToolRefused(
                "tool_unavailable", f"MCP server {self.name!r} is {self.state.state}: {self.state.reason}"
            )
        if not self._breaker.admit(time.monotonic()):
            raise ToolRefused("tool_unavailable", f"MCP server {self.name!r} is degraded: {self.state.reason}")

    def _fault(self, error: ExecutorError) -> None:
        if self._breaker.faulted(time.monotonic()):
            faults = self._breaker.faults
            self._opened_why = f"circuit open after {faults} consecutive faults (last: {error.reason_code})"
            self._changed()

    async def _run(self) -> None:
        delay: float | None = None
        while True:
            served_s = await self._serve_once()
            delay = self._backoff.after(delay, served_s)
            await self._sleep(delay)

    async def _serve_once(self) -> float:
        """Start the server and serve until its connection is lost; return how long it served, seconds."""
        began = time.monotonic()
        connection = self._session.connection()
        try:
            await connection.client()
        except ToolFailed as error:
            self._live(UNAVAILABLE, error.reason.removeprefix(f"MCP server {self.name!r} "))
            return 0.0
        listed = connection.listed()
        self._live(READY, f"{listed} tool{'' if listed == 1 else 's'}, {time.monotonic() - began:.1f} s")
        ready_at = time.monotonic()
        await asyncio.wait({connection.owner})
        self._live(UNAVAILABLE, f"its connection ended ({connection.fault}); restarting")
        return time.monotonic() - ready_at

    def _live(self, state: str, reason: str) -> None:
        self._life = ServerState(state=state, reason=reason, since=_utc())
        self.settled.set()
        self._changed()

    def _changed(self, note: str = "") -> None:
        """Recompute the state (a ready server with an open circuit is degraded); log and report a change."""
        state, reason = self._life.state, note or self._life.reason
        if state == READY and self._breaker.circuit is not Circuit.CLOSED:
            state, reason = DEGRADED, self._opened_why
        if (state, reason) == (self.state.state, self.state.reason):
            return
        self.state = ServerState(state=state, reason=reason, since=_utc())
        if state == READY:
            log.info("mcp server %s: ready (%s)", self.name, reason)
        else:
            log.warning("mcp server %s: %s: %s", self.name, state, reason)
        if self._on_change is not None:
            self._on_change(self.name, self.state)


def _utc() -> datetime:
    return datetime.now(UTC)
