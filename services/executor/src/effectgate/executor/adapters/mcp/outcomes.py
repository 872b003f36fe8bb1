"""How an MCP call ends, and what its result holds."""

from __future__ import annotations

from typing import Any

from mcp import MCPError
from mcp_types import CONNECTION_CLOSED, CallToolResult, TextContent
from pydantic import ValidationError

from effectgate.executor.adapters.mcp.connection import Connection
from effectgate.executor.domain import clipped
from effectgate.executor.errors import ExecutorError, ToolFailed, ToolOutcomeUnknown, ToolTimeout

__all__ = ["Attempt", "clipped", "result_of"]


class Attempt:
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
            return ToolOutcomeUnknown("output_invalid", clipped(f"MCP tool {self.server}/{self.tool}: {exc}"))
        return self._lost()

    def _rpc_failure(self, exc: MCPError) -> ExecutorError:
        if exc.code == CONNECTION_CLOSED and self.connection.lost:
            return self._lost()
        return ToolFailed("tool_error", clipped(exc.message))

    def _lost(self) -> ToolOutcomeUnknown:
        fault = self.connection.fault
        what = "sent a reply that is not JSON-RPC" if fault == "malformed_reply" else "closed the connection"
        return ToolOutcomeUnknown(fault, f"MCP server {self.server!r} {what} during the call; its effect is unknown")


def result_of(result: CallToolResult) -> dict[str, Any]:
    """The result shape of the module doc; an ``isError`` result raises ``ToolFailed("tool_error")``."""
    if result.is_error:
        texts = [block.text for block in result.content if isinstance(block, TextContent)]
        raise ToolFailed("tool_error", clipped(texts[0] if texts else "the tool reported an error"))
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
