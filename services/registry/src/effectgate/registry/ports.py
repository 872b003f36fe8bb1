"""The registry's ports: listing an MCP server, and recording the tool states the executor announces."""

from __future__ import annotations

from typing import Protocol

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.shared.mcp.servers import McpServerConfig

__all__ = ["ServerImporter", "ToolStates"]


class ServerImporter(Protocol):
    """Lists one configured MCP server as a tool descriptor (:mod:`effectgate.registry.adapters.mcp_import`)."""

    async def __call__(self, config: McpServerConfig, timeout_s: float = 30.0) -> ToolDescriptor:
        """The server's descriptor, listed within ``timeout_s`` seconds.

        Raises:
            RegistryError / ValueError: the listing or the configuration is refused (final).
            Exception: the server could not be listed now (a crash, a hang, a refused connection).
        """
        ...


class ToolStates(Protocol):
    """The registry's record of each tool's announced state (:mod:`effectgate.registry.adapters.state_recorder`)."""

    async def record(self, subject: str, data: bytes) -> bool:
        """Record one announcement delivered on ``subject``; return whether it was recorded."""
        ...
