"""Test support for the MCP adapter: scripted MCP servers whose tools a test rewrites."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from effectgate.contracts.tools.descriptors import OperationSpec
from effectgate.shared.mcp.mapping import operation_from_mcp, tool_from_wire
from effectgate.shared.mcp.servers import McpServerConfig

SCRIPT = Path(__file__).resolve().parents[4] / "tests" / "fixtures" / "mcp" / "scripted_server.py"


def tool(name: str, behaviour: str = "echo", **fields: Any) -> dict[str, Any]:
    """One tool definition of the scripted server (wire names: ``inputSchema``, ``annotations`` …)."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": False}
    return {"name": name, "description": f"{name} tool", "inputSchema": schema, "behaviour": behaviour, **fields}


class Scripted:
    """A scripted server: its definitions file, its configuration, and the operations it registers.

    Attributes:
        workdir: where the server writes its effects (marker files) and ``starts.log``.
        config: the server's :class:`McpServerConfig`.
    """

    def __init__(self, workdir: Path, name: str, tools: list[dict[str, Any]], **config: Any) -> None:
        self.workdir = workdir
        self._path = workdir / f"{name}.json"
        self._definitions: dict[str, Any] = {"version": "1.0.0", "workdir": str(workdir), "tools": tools}
        self._save()
        self.config = McpServerConfig(name=name, command=sys.executable, args=[str(SCRIPT), str(self._path)], **config)

    def change(self, **definitions: Any) -> None:
        """Rewrite top-level definitions (``startup``, ``listing``, ``tools``, ``version``)."""
        self._definitions.update(definitions)
        self._save()

    def change_tool(self, name: str, **fields: Any) -> None:
        """Rewrite fields of one tool (e.g. ``annotations``, ``inputSchema``, ``behaviour``)."""
        tools = [{**entry, **fields} if entry["name"] == name else entry for entry in self._definitions["tools"]]
        self.change(tools=tools)

    def add_tool(self, definition: dict[str, Any]) -> None:
        """List one more tool (a :func:`tool` definition)."""
        self.change(tools=[*self._definitions["tools"], definition])

    def registered(self, name: str) -> OperationSpec:
        """The operation the registry publishes for tool ``name`` as currently defined."""
        entry = next(entry for entry in self._definitions["tools"] if entry["name"] == name)
        return operation_from_mcp(self.config, tool_from_wire(entry))

    def _save(self) -> None:
        self._path.write_text(json.dumps(self._definitions))


class ScriptedServers:
    """Makes :class:`Scripted` servers in one directory: ``servers(name, [servers.tool(...)], **config)``."""

    tool = staticmethod(tool)

    def __init__(self, workdir: Path) -> None:
        self._workdir = workdir

    def __call__(self, name: str, tools: list[dict[str, Any]], **config: Any) -> Scripted:
        return Scripted(self._workdir, name, tools, **config)


@pytest.fixture
def mcp_servers(tmp_path: Path) -> ScriptedServers:
    """Scripted MCP servers writing into this test's temporary directory."""
    return ScriptedServers(tmp_path)
