"""Import the tools of a stdio MCP server as a tool descriptor.

Starts the configured server with the official ``mcp`` SDK (``mcp.Client`` over stdio),
reads its version and its whole ``tools/list`` (all pages), stops it, and maps the
listing with :func:`toolgate.shared.mcp_mapping.descriptor_from_mcp`.
"""

from __future__ import annotations

import asyncio

from mcp import Client, StdioServerParameters
from mcp.types import Tool

from toolgate.shared.descriptors import ToolDescriptor
from toolgate.shared.mcp_config import McpServerConfig
from toolgate.shared.mcp_mapping import McpToolInfo, descriptor_from_mcp

__all__ = ["import_mcp_server", "list_mcp_tools", "server_parameters", "tool_info"]

_MAX_PAGES = 100
"""Bound on ``tools/list`` pages, so a server whose cursor never ends cannot hang an import."""

_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def server_parameters(config: McpServerConfig) -> StdioServerParameters:
    """Return the SDK's stdio launch parameters for ``config``."""
    return StdioServerParameters(command=config.command, args=list(config.args), env=dict(config.env) or None)


async def list_mcp_tools(config: McpServerConfig, timeout_s: float = 30.0) -> tuple[str, list[McpToolInfo]]:
    """Start the server, list its tools, stop it.

    Args:
        config: the server to start.
        timeout_s: wall-clock limit for start, handshake and listing, seconds.

    Returns:
        ``(server_version, tools)``; the version is ``"0.0.0"`` when the server does
        not identify itself.

    Raises:
        TimeoutError: the server did not answer within ``timeout_s``.
        OSError: the command could not be started.
        mcp.MCPError: the server answered with a JSON-RPC error or closed the connection.
    """
    async with asyncio.timeout(timeout_s), Client(server_parameters(config)) as client:
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
    """Convert the SDK's ``Tool`` into the registry's :class:`McpToolInfo`."""
    annotations = None
    if tool.annotations is not None:
        wire = tool.annotations.model_dump(by_alias=True)
        annotations = {hint: wire.get(hint) for hint in _HINTS}
    return McpToolInfo(
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema),
        output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
        annotations=annotations,
    )


async def import_mcp_server(config: McpServerConfig, timeout_s: float = 30.0) -> ToolDescriptor:
    """Return the descriptor ``mcp_<server>`` of the server's current tool listing.

    Raises:
        ValueError: the configuration's overrides do not fit the listing (see
            :func:`~toolgate.shared.mcp_mapping.descriptor_from_mcp`).
        TimeoutError, OSError, mcp.MCPError: as :func:`list_mcp_tools`.
    """
    version, tools = await list_mcp_tools(config, timeout_s)
    return descriptor_from_mcp(config, version, tools)
