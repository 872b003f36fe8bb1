"""Call the tools of configured stdio MCP servers, one long-lived session per server.

Each session lives in a dedicated background task that enters ``async with mcp.Client``
and holds it open until it is told to stop: the SDK's anyio task groups must be entered
and exited in the same task, while :meth:`McpToolHost.call` may come from any task
(a FastStream handler, a test). Calls share the session concurrently (the SDK correlates
JSON-RPC ids). When the server's stdout ends (the process died), the session is marked
dead and the next call starts a new one.

Every result has the shape the registry's MCP descriptors declare::

    {"structured": <structuredContent object or None>,
     "content": [{"type": "text", "text": "..."}, {"type": "image", "mimeType": "..."}, ...]}

Binary payloads (``data``, embedded ``blob``) are dropped from the content items.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TypeAlias

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT, CallToolResult, TextContent
from pydantic import ValidationError

from toolgate.executor.errors import ToolFailed, ToolRefused, ToolTimeout
from toolgate.shared.mcp_config import McpServerConfig

__all__ = ["McpToolHost"]

logger = logging.getLogger(__name__)

_Streams: TypeAlias = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], Any]
"""What the watched transport yields: the relayed read stream and the SDK's write stream."""

_REASON_CHARS = 500
"""Longest error text copied from a server into a reason."""


class McpToolHost:
    """The executor's MCP client: one stdio session per configured server.

    Sessions start lazily on the first call to their server, or all at once with
    :meth:`start`; :meth:`aclose` stops them and their server processes. A call after
    :meth:`aclose` starts its session again.

    Args:
        servers: server name to its configuration (``load_mcp_servers``).
        start_timeout_s: limit for starting a server and its handshake, seconds.
    """

    def __init__(self, servers: Mapping[str, McpServerConfig], *, start_timeout_s: float = 30.0) -> None:
        self._sessions = {name: _Session(config, start_timeout_s) for name, config in servers.items()}

    async def start(self) -> None:
        """Start every configured server now instead of on its first call.

        Raises:
            ToolFailed: ``server_unavailable``, a server could not be started.
        """
        await asyncio.gather(*(session.client() for session in self._sessions.values()))

    async def aclose(self) -> None:
        """Stop every session and wait for its server process to end."""
        await asyncio.gather(*(session.stop() for session in self._sessions.values()))

    async def call(self, server: str, tool: str, arguments: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Call ``tool`` of ``server`` with the configured pinned arguments forced in.

        Args:
            server: configured server name (the ``<server>`` of adapter ``mcp:<server>``).
            tool: MCP tool name (the operation).
            arguments: the call's arguments; pinned arguments overwrite same-named keys.
            timeout_s: wall-clock limit of the call, including a server (re)start, seconds.

        Returns:
            ``{"structured": dict | None, "content": [dict, ...]}``.

        Raises:
            ToolRefused: ``unknown_server``, no server of that name is configured.
            ToolFailed: ``tool_error`` (an ``isError`` result or a JSON-RPC error; the
                reason is the server's first text), ``output_invalid`` (the result does
                not match the tool's output schema or the protocol), ``connection_lost``
                (the server died during the call), ``server_unavailable`` (start failed).
            ToolTimeout: ``tool_timeout``, no result within ``timeout_s``.
        """
        session = self._sessions.get(server)
        if session is None:
            raise ToolRefused("unknown_server", f"no MCP server named {server!r} is configured")
        forced = {**arguments, **session.config.pinned_arguments}
        try:
            async with asyncio.timeout(timeout_s):
                client = await session.client()
                result = await client.call_tool(tool, forced, read_timeout_seconds=timeout_s)
        except TimeoutError as exc:
            raise ToolTimeout(reason=f"MCP tool {server}/{tool} gave no result within {timeout_s}s") from exc
        except MCPError as exc:
            raise _mcp_error(exc, server, tool, timeout_s) from exc
        except (RuntimeError, ValidationError) as exc:
            raise ToolFailed("output_invalid", _clip(f"MCP tool {server}/{tool}: {exc}")) from exc
        return _result(result)


class _Session:
    """One server's session, owned by a background task; restarted when it dies."""

    def __init__(self, config: McpServerConfig, start_timeout_s: float) -> None:
        self.config = config
        self._start_timeout_s = start_timeout_s
        self._lock = asyncio.Lock()
        self._client: Client | None = None
        self._stop = asyncio.Event()
        self._owner: asyncio.Task[None] | None = None

    async def client(self) -> Client:
        """Return the live client, starting the server if there is none or it died.

        Raises:
            ToolFailed: ``server_unavailable``.
            TimeoutError: the start took longer than ``start_timeout_s``.
        """
        async with self._lock:
            if self._client is None or self._stop.is_set():
                await self._restart()
            assert self._client is not None
            return self._client

    async def stop(self) -> None:
        """Tell the owner task to leave the session and wait until it has."""
        async with self._lock:
            await self._reap()

    async def _restart(self) -> None:
        await self._reap()
        stop = self._stop = asyncio.Event()
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(ready, stop), name=f"mcp-session-{self.config.name}")
        ready.add_done_callback(_consume)
        try:
            self._client = await asyncio.wait_for(asyncio.shield(ready), self._start_timeout_s)
        except BaseException:
            # Give up without waiting (the caller may be out of time): the owner is
            # cancelled now and awaited by the next restart or stop.
            stop.set()
            self._owner.cancel()
            raise

    async def _reap(self) -> None:
        self._stop.set()
        self._client = None
        owner, self._owner = self._owner, None
        if owner is not None and not owner.done():
            try:
                await asyncio.wait_for(asyncio.shield(owner), 10.0)
            except TimeoutError:
                owner.cancel()
                await asyncio.gather(owner, return_exceptions=True)

    async def _own(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        params = StdioServerParameters(
            command=self.config.command, args=list(self.config.args), env=dict(self.config.env) or None
        )
        try:
            async with Client(_watched(params, stop.set)) as client:
                ready.set_result(client)
                await stop.wait()
        except Exception as exc:
            logger.warning("MCP server %r session ended with an error: %r", self.config.name, exc)
            if not ready.done():
                failure = ToolFailed("server_unavailable", f"MCP server {self.config.name!r} did not start")
                ready.set_exception(failure)
        finally:
            stop.set()
            if not ready.done():
                ready.cancel()


@contextlib.asynccontextmanager
async def _watched(params: StdioServerParameters, on_closed: Callable[[], None]) -> AsyncIterator[_Streams]:
    """The SDK's stdio transport, calling ``on_closed`` when the server's stdout ends."""
    async with stdio_client(params) as (read, write):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            try:
                async with send:
                    async for item in read:
                        await send.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            finally:
                on_closed()

        async with anyio.create_task_group() as group:
            group.start_soon(relay)
            try:
                yield receive, write
            finally:
                group.cancel_scope.cancel()


def _consume(future: asyncio.Future[Client]) -> None:
    """Mark a start failure as retrieved, even when the caller gave up waiting for it."""
    if not future.cancelled():
        future.exception()


def _mcp_error(exc: MCPError, server: str, tool: str, timeout_s: float) -> ToolFailed | ToolTimeout:
    if exc.code == REQUEST_TIMEOUT:
        return ToolTimeout(reason=f"MCP tool {server}/{tool} gave no result within {timeout_s}s")
    if exc.code == CONNECTION_CLOSED:
        return ToolFailed("connection_lost", f"MCP server {server!r} closed the connection during the call")
    return ToolFailed("tool_error", _clip(exc.message))


def _result(result: CallToolResult) -> dict[str, Any]:
    if result.is_error:
        texts = [block.text for block in result.content if isinstance(block, TextContent)]
        raise ToolFailed("tool_error", _clip(texts[0] if texts else "the tool reported an error"))
    return {"structured": result.structured_content, "content": [_content(block) for block in result.content]}


def _content(block: Any) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    item: dict[str, Any] = block.model_dump(mode="json", by_alias=True, exclude_none=True)
    item.pop("data", None)
    if isinstance(item.get("resource"), dict):
        item["resource"].pop("blob", None)
    return item


def _clip(text: str) -> str:
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"
