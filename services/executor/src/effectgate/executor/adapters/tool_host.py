"""Dispatches a call to the adapter its descriptor names: ``file_system``, ``mcp:<server>`` or ``python:<worker>``.

The adapters are declared once, in :mod:`effectgate.contracts.tools.adapters`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from effectgate.contracts.tools.adapters import FILE_SYSTEM, MCP, PYTHON, adapter_kind
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.hosting import CallContext
from effectgate.executor.adapters.file_system import FileSystemTool
from effectgate.executor.effects.binding import Guard
from effectgate.executor.errors import ToolRefused

if TYPE_CHECKING:  # the MCP client stack (~20 MiB resident) is imported only where MCP servers are configured
    from effectgate.executor.adapters.mcp.client import McpToolHost
    from effectgate.executor.adapters.python.host import PythonToolHost

__all__ = ["LocalToolHost"]


class LocalToolHost:
    """:class:`~effectgate.executor.effects.running.ToolHost` over the in-process, MCP and Python tool adapters."""

    def __init__(
        self, file_system: FileSystemTool, mcp: McpToolHost | None, python: PythonToolHost | None = None
    ) -> None:
        self._file_system = file_system
        self._mcp = mcp
        self._python = python

    async def call(
        self,
        descriptor: ToolDescriptor,
        operation: str,
        arguments: dict[str, Any],
        guard: Guard | None = None,
        *,
        context: CallContext | None = None,
    ) -> Any:
        """Run ``operation`` of ``descriptor`` with ``arguments``.

        An MCP call also gets the registered operation, which the live tool must still
        match (:meth:`McpToolHost.call`); a Python tool's call gets ``context`` (the file
        system and MCP adapters take none). ``guard`` goes to the adapter, which calls it
        right before the effect.

        Raises:
            ToolRefused: ``unknown_adapter`` when no adapter serves the descriptor,
                ``unknown_operation`` when the descriptor has no such operation,
                ``no_context`` for a Python tool's call without one.
            ExecutorError: whatever the adapter raises.
        """
        kind, name = adapter_kind(descriptor.adapter) or ("", "")
        if kind == FILE_SYSTEM:
            return await self._file_system.call(operation, arguments, guard)
        if kind == MCP and self._mcp is not None:
            expected = descriptor.operations.get(operation)
            if expected is None:
                raise ToolRefused("unknown_operation", f"{descriptor.name} has no operation {operation!r}")
            return await self._mcp.call(name, operation, arguments, descriptor.timeout_s, expected, guard)
        if kind == PYTHON and self._python is not None:
            if context is None:
                raise ToolRefused("no_context", "a Python tool runs only with the executor's call context")
            return await self._python.call(name, descriptor, operation, arguments, context, guard)
        raise ToolRefused("unknown_adapter", f"no adapter {descriptor.adapter!r} is configured in this executor")
