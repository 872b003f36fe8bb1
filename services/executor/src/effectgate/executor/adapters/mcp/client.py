"""Call the tools of configured MCP servers (stdio or Streamable HTTP), one long-lived session per server.

After :meth:`McpToolHost.start` every server is kept warm by its :class:`~.warden.Warden`
(started at once, restarted with backoff, a circuit breaker over its calls); a call to a server
that is not ready ends at once as ``ToolRefused("tool_unavailable")``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from mcp import Client

from effectgate.contracts.tools.descriptors import OperationSpec
from effectgate.contracts.vocabulary import SideEffectClass
from effectgate.executor.adapters.mcp.breaker import Breaker
from effectgate.executor.adapters.mcp.connection import Connection
from effectgate.executor.adapters.mcp.outcomes import Attempt, clipped, result_of
from effectgate.executor.adapters.mcp.session import McpSession
from effectgate.executor.adapters.mcp.warden import Backoff, ServerState, Warden
from effectgate.executor.effects.binding import Guard
from effectgate.executor.errors import ExecutorError, ToolRefused
from effectgate.shared.mcp.mapping import McpToolInfo, operation_changes, operation_from_mcp
from effectgate.shared.mcp.servers import McpServerConfig

__all__ = ["McpToolHost"]

_MARGIN_S = 0.25
"""How much earlier than ``timeout_s`` a call gives its own answer, at most, seconds: a
caller enforcing the same limit then gets the precise outcome, not its own timeout."""


class McpToolHost:
    """The executor's MCP client: one session per configured server, kept warm once started.

    :meth:`aclose` stops every warden and session and its server process.

    Args:
        servers: server name to its configuration (``load_mcp_servers``).
        start_timeout_s: limit for starting a server (spawn, handshake, first listing), seconds.
        listing_max_age_s: oldest live listing a READ_ONLY call may be checked against, seconds.
        breaker_faults: consecutive faults that open a server's circuit.
        breaker_cool_down_s: how long an open circuit refuses calls before one probe, seconds.
        on_change: called with ``(server, state)`` at each change of a server's state.
        restart: the delays between a server's restarts (default: :class:`Backoff`'s).
    """

    def __init__(
        self,
        servers: Mapping[str, McpServerConfig],
        *,
        start_timeout_s: float = 30.0,
        listing_max_age_s: float = 5.0,
        breaker_faults: int = 5,
        breaker_cool_down_s: float = 30.0,
        on_change: Callable[[str, ServerState], None] | None = None,
        restart: Backoff | None = None,
    ) -> None:
        self._sessions = {name: McpSession(config, start_timeout_s) for name, config in servers.items()}
        self._wardens = {
            name: Warden(session, Breaker(breaker_faults, breaker_cool_down_s), on_change, restart)
            for name, session in self._sessions.items()
        }
        self._warm = False
        self._listing_max_age_s = listing_max_age_s

    async def start(self) -> None:
        """Start every configured server now, concurrently, and keep each warm from then on.

        Returns once each server is ready or unavailable (a start is bounded by
        ``start_timeout_s``); a server that cannot start is logged and refused, never raised.
        """
        self.launch()
        await asyncio.gather(*(warden.settled.wait() for warden in self._wardens.values()))

    def launch(self) -> None:
        """Start keeping every server warm without waiting (:meth:`start` then waits; idempotent)."""
        self._warm = True
        for warden in self._wardens.values():
            warden.start()

    def states(self) -> dict[str, ServerState]:
        """Each configured server's current state (read-only; for listings and metrics)."""
        return {name: warden.state for name, warden in self._wardens.items()}

    async def aclose(self) -> None:
        """Stop every warden and session and wait for its server process to end.

        Safe while calls are in flight (they end as their connection is lost) and after
        calls were cancelled; raises nothing unless the calling task itself is cancelled.
        """
        for warden in self._wardens.values():
            await warden.stop()
        for session in self._sessions.values():
            await session.stop()

    async def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        timeout_s: float,
        expected: OperationSpec,
        guard: Guard | None = None,
    ) -> dict[str, Any]:
        """Call ``tool`` of ``server`` if it is still the tool that was registered.

        Args:
            server: configured server name (the ``<server>`` of adapter ``mcp:<server>``).
            tool: MCP tool name (the operation).
            arguments: the call's arguments; pinned arguments overwrite same-named keys.
            timeout_s: wall-clock limit of the call, a server (re)start included, seconds.
            expected: the registered operation the call runs under.
            guard: a granted call's content check, run right before the call is sent.

        Returns:
            ``{"structured": dict | None, "content": [dict, ...]}``.

        Raises:
            ToolRefused: ``unknown_server``; ``tool_unavailable`` (server not ready or its circuit
                open: nothing sent); ``tool_definition_changed``, ``content_changed`` (nothing sent).
            ToolFailed: ``server_unavailable`` (nothing sent), ``tool_error``.
            ToolOutcomeUnknown: ``connection_lost``, ``malformed_reply``, ``output_invalid``.
            ToolTimeout: ``tool_timeout``, sent and no answer in time.
        """
        session = self._sessions.get(server)
        if session is None:
            raise ToolRefused("unknown_server", f"no MCP server named {server!r} is configured")
        if not self._warm:
            return await self._call(session, tool, arguments, timeout_s, expected, guard)
        with self._wardens[server].watched():
            return await self._call(session, tool, arguments, timeout_s, expected, guard)

    async def _call(
        self,
        session: McpSession,
        tool: str,
        arguments: dict[str, Any],
        timeout_s: float,
        expected: OperationSpec,
        guard: Guard | None,
    ) -> dict[str, Any]:
        attempt = Attempt(session.config.name, tool, session.connection())
        budget_s = timeout_s - min(_MARGIN_S, timeout_s / 10)
        forced = {**arguments, **session.config.pinned_arguments}
        try:
            async with asyncio.timeout(budget_s):
                return await self._run(attempt, session.config, forced, expected, guard)
        except asyncio.CancelledError:
            if _being_cancelled():
                raise
            raise attempt.failure(ConnectionAbortedError("cancelled")) from None
        except TimeoutError:
            raise attempt.timed_out(budget_s) from None

    async def _run(
        self,
        attempt: Attempt,
        config: McpServerConfig,
        arguments: dict[str, Any],
        expected: OperationSpec,
        guard: Guard | None,
    ) -> dict[str, Any]:
        try:
            client = await attempt.connection.client()
            await self._checked(attempt.connection, client, config, attempt.tool, expected)
            if guard is not None:
                await asyncio.to_thread(guard)  # the files as the approval bound them, checked last
            attempt.send()
            result = await client.session.call_tool(attempt.tool, arguments)
        except ExecutorError:
            raise
        except Exception as exc:
            raise attempt.failure(exc) from exc
        return result_of(result)

    async def _checked(
        self, connection: Connection, client: Client, config: McpServerConfig, tool: str, expected: OperationSpec
    ) -> None:
        """Check ``tool`` against the live listing; a READ_ONLY call's cached listing is re-fetched before a refusal.

        Raises:
            ToolRefused: ``tool_definition_changed`` by a listing fetched for this check.
        """
        read_only = expected.side_effect_class is SideEffectClass.READ_ONLY
        max_age_s = self._listing_max_age_s if read_only else 0.0
        try:
            _check(config, await connection.tools(client, max_age_s), tool, expected)
        except ToolRefused:
            if not read_only:
                raise
            _check(config, await connection.tools(client, 0.0), tool, expected)


def _check(config: McpServerConfig, tools: dict[str, McpToolInfo], tool: str, expected: OperationSpec) -> None:
    """Refuse unless the live ``tool`` maps to ``expected``.

    Raises:
        ToolRefused: ``tool_definition_changed``, naming what differs.
    """
    where = f"MCP tool {config.name}/{tool}"
    live = tools.get(tool)
    if live is None:
        raise ToolRefused("tool_definition_changed", f"{where} is absent from the server's listing")
    try:
        changes = operation_changes(expected, operation_from_mcp(config, live))
    except ValueError as exc:
        changes = [str(exc)]
    if changes:
        reason = clipped(f"{where} changed since it was registered: {', '.join(changes)}")
        raise ToolRefused("tool_definition_changed", reason)


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
