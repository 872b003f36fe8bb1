"""Import the tools of an MCP server (stdio or Streamable HTTP) as a tool descriptor."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TextIO

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.schemas import SchemaError, check_self_contained
from effectgate.registry.errors import PublishRefused
from effectgate.shared.mcp.mapping import McpToolInfo, descriptor_from_mcp, tool_from_wire
from effectgate.shared.mcp.servers import McpServerConfig, header_values, stdio_launch
from effectgate.shared.mcp.stderr import stderr_logged

if TYPE_CHECKING:  # the SDK (~10 MiB resident) is imported where it is used: only with MCP servers configured
    from mcp import StdioServerParameters
    from mcp.types import Tool

__all__ = ["check_listing", "import_mcp_server", "list_mcp_tools", "server_parameters", "tool_info", "transport"]

log = logging.getLogger("effectgate.registry")

_MAX_PAGES = 100
"""Bound on ``tools/list`` pages, so a server whose cursor never ends cannot hang an import."""


def server_parameters(config: McpServerConfig) -> StdioServerParameters:
    """Return the SDK's stdio launch parameters for ``config``."""
    from mcp import StdioServerParameters

    return StdioServerParameters(**stdio_launch(config))


@contextlib.asynccontextmanager
async def transport(config: McpServerConfig, errlog: TextIO = sys.stderr) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK transport to ``config``: stdio for a command (its stderr to ``errlog``), Streamable HTTP for a url.

    Raises:
        ValueError: a ``headers_env`` variable is not set (the message names it, never a value).
    """
    from mcp import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    if not config.url:
        async with stdio_client(server_parameters(config), errlog) as streams:
            yield streams
        return
    async with (
        create_mcp_http_client(headers=header_values(config)) as http,
        streamable_http_client(config.url, http_client=http) as streams,
    ):
        yield streams


async def list_mcp_tools(config: McpServerConfig, timeout_s: float = 30.0) -> tuple[str, list[McpToolInfo]]:
    """Start the server, list its tools, stop it.

    Args:
        config: the server to start.
        timeout_s: wall-clock limit for start, handshake and listing, seconds.

    Returns:
        ``(server_version, tools)``; the version is ``"0.0.0"`` when the server does
        not identify itself.

    Raises:
        TimeoutError: the server did not answer within ``timeout_s`` (the message says so).
        OSError: the command could not be started.
        ValueError: a ``headers_env`` variable is not set.
        mcp.MCPError: the server answered with a JSON-RPC error or closed the connection.

    A stdio server's stderr is logged line by line at DEBUG (:mod:`effectgate.shared.mcp.stderr`;
    the executor, which runs the same server, logs it at INFO); an error raised carries its
    last line as a note.
    """
    tail, threads = [""], list[threading.Thread]()
    try:
        async with stderr_logged(config.name, tail, log, logging.DEBUG) as (errlog, thread):  # the executor logs it
            threads.append(thread)
            return await _listing(config, timeout_s, errlog)
    except Exception as error:
        for thread in threads:  # its last lines, read once the server is gone
            await asyncio.to_thread(thread.join, 1.0)
        if tail[0]:
            error.add_note(f"its last line on stderr: {tail[0]}")
        raise


async def _listing(config: McpServerConfig, timeout_s: float, errlog: TextIO) -> tuple[str, list[McpToolInfo]]:
    try:
        return await _listed(config, timeout_s, errlog)
    except TimeoutError:
        raise TimeoutError(f"no tools/list answer within {timeout_s:g} s (start, handshake and listing)") from None


async def _listed(config: McpServerConfig, timeout_s: float, errlog: TextIO) -> tuple[str, list[McpToolInfo]]:
    from mcp import Client

    async with asyncio.timeout(timeout_s), Client(transport(config, errlog)) as client:
        info = client.server_info
        version = info.version if info is not None else "0.0.0"
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
    return version, [tool_info(tool) for tool in tools]


def tool_info(tool: Tool) -> McpToolInfo:
    """Convert the SDK's ``Tool`` into :class:`McpToolInfo`, exactly as the executor reads its live listing."""
    return tool_from_wire(tool.model_dump(by_alias=True, mode="json", exclude_none=True))


def check_listing(server: str, tools: list[McpToolInfo]) -> None:
    """Refuse a listing whose ``inputSchema`` or ``outputSchema`` refers outside itself.

    Raises:
        PublishRefused: ``schema_invalid``, naming the server, the tool, the schema and the
            JSON Pointer of the reference in that schema as the server listed it.
    """
    for tool in tools:
        for kind, schema in (("inputSchema", tool.input_schema), ("outputSchema", tool.output_schema)):
            try:
                check_self_contained(schema)
            except SchemaError as error:
                where = f"MCP server {server!r}, tool {tool.name[:120]!r}, {kind}"
                raise PublishRefused("schema_invalid", f"{where} {error}") from None


async def import_mcp_server(config: McpServerConfig, timeout_s: float = 30.0) -> ToolDescriptor:
    """Return the descriptor ``mcp_<server>`` of the server's current tool listing.

    Raises:
        PublishRefused: a listed schema is not self-contained (see :func:`check_listing`).
        ValueError: the configuration's overrides do not fit the listing (see
            :func:`~effectgate.shared.mcp.mapping.descriptor_from_mcp`).
        TimeoutError, OSError, mcp.MCPError: as :func:`list_mcp_tools`.
    """
    version, tools = await list_mcp_tools(config, timeout_s)
    check_listing(config.name, tools)
    return descriptor_from_mcp(config, version, tools)
