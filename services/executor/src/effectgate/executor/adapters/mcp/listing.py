"""A server's tool listing over MCP: every page of ``tools/list``, and whether it announces changes."""

from __future__ import annotations

from mcp import Client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from effectgate.shared.mcp.mapping import McpToolInfo, tool_from_wire

__all__ = ["announces_changes", "list_tools"]

_MAX_PAGES = 100
"""Bound on ``tools/list`` pages, so a cursor that never ends cannot hang a listing."""


async def list_tools(client: Client) -> list[McpToolInfo]:
    """Every page of ``tools/list``, as :class:`McpToolInfo`."""
    found: list[McpToolInfo] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        found += [tool_from_wire(tool.model_dump(by_alias=True, mode="json", exclude_none=True)) for tool in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            break
    return found


def announces_changes(client: Client) -> bool:
    """Whether a 2026-07-28 server serves ``tools.listChanged`` on ``subscriptions/listen``."""
    tools = client.server_capabilities.tools
    return client.protocol_version in MODERN_PROTOCOL_VERSIONS and bool(tools and tools.list_changed)
