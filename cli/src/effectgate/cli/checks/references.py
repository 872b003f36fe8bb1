"""What ``config check`` says about references: adapters and argument pointers that must exist.

Each descriptor file of the descriptor directories must name an adapter the executor has (an
``mcp:<server>`` one of the MCP servers the services load) and pointers at arguments of the
type they need (:func:`effectgate.contracts.tools.references.reference_problem`, the registry's
own check).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import msgspec

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.pointers import syntax_problem
from effectgate.contracts.tools.references import reference_problem
from effectgate.shared.mcp.servers import McpServerConfig

__all__ = ["reference_problems"]

_POINTERS = ("destination", "amount", "cost")


def reference_problems(dirs: Iterable[Path], servers: Mapping[str, McpServerConfig]) -> list[str]:
    """One line per dangling reference in the descriptor files of ``dirs`` and the ``servers``' overrides."""
    found = [line for directory in dirs for line in _directory(directory, servers)]
    return found + [line for name, server in servers.items() for line in _overrides(name, server)]


def _directory(directory: Path, servers: Mapping[str, McpServerConfig]) -> list[str]:
    """Problems of the descriptors that decode (one that does not is reported as such elsewhere)."""
    found: list[str] = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else ():
        try:
            descriptor = msgspec.json.decode(path.read_bytes(), type=ToolDescriptor)
        except (OSError, msgspec.DecodeError):
            continue
        if dangling := reference_problem(descriptor, servers):
            found.append(f"{path}: {dangling[1]}")
    return found


def _overrides(name: str, server: McpServerConfig) -> list[str]:
    found: list[str] = []
    for tool, override in server.overrides.items():
        for field in _POINTERS:
            pointer = getattr(override, field)
            if isinstance(pointer, str) and (problem := syntax_problem(pointer)):
                found.append(f"mcp.servers.{name}.overrides.{tool}.{field}: {problem}")
    return found
