"""Call the tools of configured MCP servers (stdio or Streamable HTTP), one long-lived session per server.

After :meth:`McpToolHost.start` every server is kept warm by its :class:`~.mcp_warden.Warden`
(started at once, restarted with backoff, a circuit breaker over its calls); a call to a
server that is not ready ends at once as ``ToolRefused("tool_unavailable")``. Without
``start`` (tests of the adapter alone) a session starts on the first call to its server and
is replaced when it dies. Before a call is sent, the tool's *live* definition (the session's
``tools/list``, mapped with the registry's rules and the server's configuration by
:func:`~toolgate.shared.mcp_mapping.operation_from_mcp`) must equal the registered
operation the call runs under; any difference is refused as ``tool_definition_changed``
and nothing is sent. The listing is re-fetched before every call of an operation that is
not READ_ONLY; a READ_ONLY call may use a listing fetched less than
``listing_max_age_s`` (default 5 s) ago, unless the server sent
``notifications/tools/list_changed`` since; a cached listing that would refuse the call is
fetched anew first, so a tool added since is found and a refusal always rests on a fresh listing.
A granted call's content guard (:class:`~toolgate.executor.binding.ContentGuard`) runs after
that check, in a worker thread, immediately before ``tools/call`` is sent.

How a call ends (the executor turns the error class into the receipt):

=====================================================  ===========================================
what happened                                          raised
=====================================================  ===========================================
nothing sent: server not ready or circuit open         ``ToolRefused("tool_unavailable")``
nothing sent: start, handshake or listing failed,      ``ToolFailed("server_unavailable")``
hung, or the connection ended first
live definition differs from the registered one         ``ToolRefused("tool_definition_changed")``
a granted call's files changed since its approval       ``ToolRefused("content_changed")``
the server's JSON-RPC error, or an ``isError`` result   ``ToolFailed("tool_error", <server text>)``
sent, then connection lost / process died               ``ToolOutcomeUnknown("connection_lost")``
sent, then a line that is not JSON-RPC                  ``ToolOutcomeUnknown("malformed_reply")``
sent, then a result the protocol's validation refuses   ``ToolOutcomeUnknown("malformed_reply")``
sent, then structured content breaking the tool's       ``ToolOutcomeUnknown("output_invalid")``
declared output schema
sent, no answer in time                                 ``ToolTimeout``
=====================================================  ===========================================

No call raises ``CancelledError`` unless the calling task itself is being cancelled
(``asyncio.current_task().cancelling()``): a stray cancellation from a session's task
becomes one of the errors above. Calls are sent with ``ClientSession.call_tool``, not
``Client.call_tool``, because the latter re-lists and resends once on a 2026-07-28
``HEADER_MISMATCH``: it would run a tool whose definition changed after the check.

Every result has the shape the registry's MCP descriptors declare::

    {"structured": <structuredContent object or None>,
     "content": [{"type": "text", "text": "..."}, {"type": "image", "mimeType": "..."}, ...]}

Binary payloads (``data``, embedded ``blob``) are dropped from the content items. Reasons
copied from a server are clipped to 300 characters at a whitespace, so no token is cut in
half (the executor's outlet, :mod:`toolgate.executor.outlet`, scrubs every receipt whole).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from mcp import Client, MCPError
from mcp_types import CONNECTION_CLOSED, CallToolResult, TextContent
from pydantic import ValidationError

from toolgate.contracts.descriptors import OperationSpec
from toolgate.contracts.vocabulary import SideEffectClass
from toolgate.executor.adapters.mcp_session import Connection, McpSession
from toolgate.executor.adapters.mcp_warden import Backoff, ServerState, Warden
from toolgate.executor.binding import Guard
from toolgate.executor.breaker import Breaker
from toolgate.executor.errors import ExecutorError, ToolFailed, ToolOutcomeUnknown, ToolRefused, ToolTimeout
from toolgate.shared.mcp_config import McpServerConfig
from toolgate.shared.mcp_mapping import McpToolInfo, operation_changes, operation_from_mcp

__all__ = ["McpToolHost"]

_REASON_CHARS = 300
"""Longest text copied from a server into a reason."""

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
        attempt = _Attempt(session.config.name, tool, session.connection())
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
        attempt: _Attempt,
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
        return _result(result)

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


class _Attempt:
    """One call's progress: whether anything was sent decides what a failure means."""

    def __init__(self, server: str, tool: str, connection: Connection) -> None:
        self.server, self.tool, self.connection = server, tool, connection
        self.sent = False

    def send(self) -> None:
        """Mark the call sent, unless the connection is already gone (then nothing is sent)."""
        if self.connection.lost:
            raise ToolFailed("server_unavailable", f"MCP server {self.server!r} closed before the call was sent")
        self.sent = True

    def timed_out(self, budget_s: float) -> ExecutorError:
        """The error for a call that ran out of time."""
        if not self.sent:
            return ToolFailed("server_unavailable", f"MCP server {self.server!r} was not ready within {budget_s:g}s")
        return ToolTimeout(reason=f"MCP tool {self.server}/{self.tool} gave no result within {budget_s:g}s")

    def failure(self, exc: BaseException) -> ExecutorError:
        """The error for ``exc`` raised by the SDK (table in the module doc)."""
        if not self.sent:
            return ToolFailed("server_unavailable", f"MCP server {self.server!r} is not available ({_name(exc)})")
        if isinstance(exc, MCPError):
            return self._rpc_failure(exc)
        if isinstance(exc, ValidationError):
            return ToolOutcomeUnknown("malformed_reply", f"MCP tool {self.server}/{self.tool}: the reply is invalid")
        if isinstance(exc, RuntimeError):
            return ToolOutcomeUnknown("output_invalid", _text(f"MCP tool {self.server}/{self.tool}: {exc}"))
        return self._lost()

    def _rpc_failure(self, exc: MCPError) -> ExecutorError:
        if exc.code == CONNECTION_CLOSED and self.connection.lost:
            return self._lost()
        return ToolFailed("tool_error", _text(exc.message))

    def _lost(self) -> ToolOutcomeUnknown:
        fault = self.connection.fault
        what = "sent a reply that is not JSON-RPC" if fault == "malformed_reply" else "closed the connection"
        return ToolOutcomeUnknown(fault, f"MCP server {self.server!r} {what} during the call; its effect is unknown")


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
        reason = _text(f"{where} changed since it was registered: {', '.join(changes)}")
        raise ToolRefused("tool_definition_changed", reason)


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _result(result: CallToolResult) -> dict[str, Any]:
    if result.is_error:
        texts = [block.text for block in result.content if isinstance(block, TextContent)]
        raise ToolFailed("tool_error", _text(texts[0] if texts else "the tool reported an error"))
    return {"structured": result.structured_content, "content": [_content(block) for block in result.content]}


def _content(block: Any) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    item: dict[str, Any] = block.model_dump(mode="json", by_alias=True, exclude_none=True)
    item.pop("data", None)
    if isinstance(item.get("resource"), dict):
        item["resource"].pop("blob", None)
    return item


def _name(exc: BaseException) -> str:
    """A secret-free name for an error: its JSON-RPC code or its type."""
    return f"JSON-RPC error {exc.code}" if isinstance(exc, MCPError) else type(exc).__name__


def _text(text: str) -> str:
    """``text`` clipped to :data:`_REASON_CHARS` at its last whitespace, never inside a token.

    A token cut in half could escape the detectors that recognise it whole (a URL's
    password without its ``@``): the cut drops the partial token instead.
    """
    if len(text) <= _REASON_CHARS:
        return text
    head = text[: _REASON_CHARS - 1]
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    return head[:cut].rstrip() + "…" if cut > 0 else "…"
