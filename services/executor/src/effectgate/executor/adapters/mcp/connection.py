"""One MCP server's connection (stdio or Streamable HTTP): started, owned by one task, watched, lost.

A :class:`Connection` is one server process and its ``mcp.Client``, held open by an *owner*
task (the SDK's anyio task groups must be entered and exited in one task; calls come from any
task).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, ToolListChangedNotification

from effectgate.executor.adapters.mcp.listing import announces_changes, list_tools
from effectgate.executor.errors import ToolFailed
from effectgate.shared.mcp.mapping import McpToolInfo
from effectgate.shared.mcp.servers import McpServerConfig, header_values, stdio_launch
from effectgate.shared.mcp.stderr import stderr_logged

__all__ = ["Connection"]

logger = logging.getLogger(__name__)


class Connection:
    """One server process and its client, from start to loss; never restarted.

    Attributes:
        name: the server's configured name.
        lost: the transport ended (server exited, stdout closed, malformed line) or the
            connection was told to stop; no new call may be sent on it.
        fault: reason code for calls the loss interrupted: ``connection_lost`` or
            ``malformed_reply``.
    """

    def __init__(self, config: McpServerConfig, start_timeout_s: float) -> None:
        self.name = config.name
        self.lost = False
        self.fault = "connection_lost"
        self._config = config
        self._start_timeout_s = start_timeout_s
        self._start_deadline = _now() + start_timeout_s
        self._ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._ready.add_done_callback(_retrieved)
        self._leave = asyncio.Event()
        self._scope: anyio.CancelScope | None = None
        self._serving = False
        self._changes = 0
        self._listing: tuple[dict[str, McpToolInfo], float, int] | None = None
        self.stderr_tail = [""]
        self._stderr: threading.Thread | None = None
        self.owner = asyncio.create_task(self._own(), name=f"mcp-session-{config.name}")

    async def client(self) -> Client:
        """Wait for the start (bounded by the caller's own timeout) and return the client.

        Raises:
            ToolFailed: ``server_unavailable``, the start failed or the connection is lost.
        """
        await asyncio.wait({self._ready}, timeout=max(self._start_deadline - _now(), 0.0))
        if not self._ready.done():  # the start is over its deadline: fail now, let the owner stop the process
            self._fail(f"did not finish its start-up within {self._start_timeout_s:g}s")
            self.close()
        if self._ready.cancelled() or self._ready.exception() is not None or self.lost:
            raise ToolFailed("server_unavailable", self._why())
        return self._ready.result()

    def listed(self) -> int:
        """How many tools the last listing held (0 before the first)."""
        return len(self._listing[0]) if self._listing is not None else 0

    async def tools(self, client: Client, max_age_s: float) -> dict[str, McpToolInfo]:
        """The live listing: the last one if younger than ``max_age_s`` and unchanged since, else a new one.

        Args:
            client: this connection's client (from :meth:`client`).
            max_age_s: oldest listing still acceptable, seconds; ``0`` always re-lists.

        Raises:
            Exception: whatever listing raises (the caller maps it; nothing was sent).
        """
        if self._listing is not None:
            tools, fetched_at, changes = self._listing
            if changes == self._changes and asyncio.get_running_loop().time() - fetched_at < max_age_s:
                return tools
        return await self._refresh(client)

    def close(self) -> None:
        """Ask the owner to leave the session (a start still running is cancelled)."""
        self._lose(self.fault)
        if self._scope is not None and not self._serving:
            self._scope.cancel()

    def cancel(self) -> None:
        """Cancel the owner's session outright (the SDK still stops the process, bounded)."""
        self._lose(self.fault)
        if self._scope is not None:
            self._scope.cancel()

    async def _own(self) -> None:
        deadline = self._start_deadline
        why = "was stopped before its start-up finished"
        try:
            with anyio.CancelScope(deadline=deadline) as scope:
                self._scope = scope
                await self._session(scope)
        except Exception as exc:
            logger.debug("MCP server %r session ended with an error: %r", self.name, exc)
            why = _summary(exc) + await self._last_words()
        finally:
            if _now() >= deadline:
                why = f"did not finish its start-up within {self._start_timeout_s:g}s"
            self._lose(self.fault)
            self._fail(why)

    async def _last_words(self) -> str:
        """``": <last stderr line>"`` once the stderr reader has read to the end (bounded), else ``""``."""
        if self._stderr is not None:
            await asyncio.to_thread(self._stderr.join, 1.0)
        return f": {self.stderr_tail[0]}" if self.stderr_tail[0] else ""

    async def _session(self, scope: anyio.CancelScope) -> None:
        if self.lost:
            return
        config = self._config
        params = StdioServerParameters(**stdio_launch(config))
        transport = _http(config) if config.url else self._relayed(params)
        async with Client(transport, message_handler=self._on_message, cache=None) as client:
            try:
                await self._serve(client, scope)
            finally:
                self._lose(self.fault)  # before the client's exit wakes pending calls with "connection closed"

    async def _serve(self, client: Client, scope: anyio.CancelScope) -> None:
        await self._refresh(client)
        scope.deadline = math.inf
        self._serving = True
        self._ready.set_result(client)
        async with anyio.create_task_group() as group:
            if announces_changes(client):
                group.start_soon(self._listen, client)
            await self._leave.wait()
            group.cancel_scope.cancel()

    async def _refresh(self, client: Client) -> dict[str, McpToolInfo]:
        changes, fetched_at = self._changes, asyncio.get_running_loop().time()
        tools = {tool.name: tool for tool in await list_tools(client)}
        if self._listing is None or fetched_at >= self._listing[1]:
            self._listing = (tools, fetched_at, changes)
        return tools

    async def _listen(self, client: Client) -> None:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    self._changes += 1
        except Exception as exc:
            logger.info("MCP server %r: tools/list_changed stream ended: %r", self.name, exc)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._changes += 1

    @contextlib.asynccontextmanager
    async def _relayed(self, params: StdioServerParameters) -> AsyncIterator[tuple[Any, Any]]:
        """The SDK's stdio transport, relayed so that the connection is marked lost first."""
        async with (
            stderr_logged(self.name, self.stderr_tail, logger) as (errlog, self._stderr),
            stdio_client(params, errlog) as (read, write),
        ):
            send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

            async def relay() -> None:
                fault = "connection_lost"
                try:
                    async for item in read:
                        if isinstance(item, Exception):
                            fault = "malformed_reply"
                            break
                        await send.send(item)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass
                finally:
                    self._lose(fault)
                    send.close()

            async with anyio.create_task_group() as group:
                group.start_soon(relay)
                try:
                    yield receive, write
                finally:
                    group.cancel_scope.cancel()

    def _lose(self, fault: str) -> None:
        if not self.lost:
            self.lost, self.fault = True, fault
        self._leave.set()

    def _fail(self, why: str) -> None:
        if not self._ready.done():
            self._ready.set_exception(ToolFailed("server_unavailable", f"MCP server {self.name!r} {why}"))

    def _why(self) -> str:
        failure = None if self._ready.cancelled() else self._ready.exception()
        if isinstance(failure, ToolFailed):
            return failure.reason
        return f"MCP server {self.name!r} ended its connection ({self.fault}) before the call was sent"


@contextlib.asynccontextmanager
async def _http(config: McpServerConfig) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's Streamable HTTP transport to ``config.url``, sending the ``headers_env`` headers.

    Raises:
        ValueError: a header's environment variable is not set (nothing is sent).
    """
    async with (
        create_mcp_http_client(headers=header_values(config)) as http,
        streamable_http_client(config.url, http_client=http) as streams,
    ):
        yield streams


def _now() -> float:
    """The event loop's clock, seconds (anyio's deadlines use the same clock on asyncio)."""
    return asyncio.get_running_loop().time()


def _retrieved(future: asyncio.Future[Client]) -> None:
    """Mark a start failure as seen: no call may be waiting for it."""
    if not future.cancelled():
        future.exception()


def _summary(exc: BaseException) -> str:
    """A short, secret-free account of a start failure: the error's type and code, never its text."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
        return "ended its connection during start-up (the command exited or closed stdout)"
    if isinstance(exc, ValueError) and "headers_env" in str(exc):
        return str(exc).partition(": ")[2]  # names the variable, never a value
    if isinstance(exc, MCPError):
        return f"failed its start-up (JSON-RPC error {exc.code})"
    return f"failed its start-up ({type(exc).__name__})"
