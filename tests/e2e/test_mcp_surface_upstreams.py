"""Upstream MCP servers behind the surface: one broken server affects only its own tools; progress while held."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from .support import Gate, Paths
from .surface_support import Surfaces, http_client

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "scripted_server.py"
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
SERVERS = {
    "good": [{"name": "echo", "behaviour": "echo", "annotations": READ_ONLY}],
    "broken": [
        {"name": "die", "behaviour": "touch_then_die", "annotations": READ_ONLY},
        {"name": "fail", "behaviour": "is_error", "message": "the disk is full", "annotations": READ_ONLY},
    ],
}


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Paths) -> dict[str, str]:
    directory = Path(e2e_paths.state).parent / "upstreams"
    directory.mkdir(exist_ok=True)
    tables = []
    for server, tools in SERVERS.items():
        full = [{"description": f"{tool['name']} tool", "inputSchema": NAME, **tool} for tool in tools]
        document = {"version": "1.0.0", "workdir": str(directory), "tools": full}
        (directory / f"{server}.json").write_text(json.dumps(document))
        arguments = json.dumps([str(SCRIPT), str(directory / f"{server}.json")])
        tables.append(f'[servers.{server}]\ncommand = "{sys.executable}"\nargs = {arguments}\ntrust_hints = true\n')
    (directory / "servers.toml").write_text("\n".join(tables))
    return {"EFFECTGATE_MCP_SERVERS_FILE": str(directory / "servers.toml")}


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def test_a_broken_upstream_fails_only_its_own_tools(gate: Gate, surfaces: Surfaces) -> None:
    url = surfaces.start()
    async with http_client(url, surfaces.token_of(gate.agent()), "legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"mcp_good__echo", "mcp_broken__die", "mcp_broken__fail"} <= names, sorted(names)
        failing = await client.call_tool("mcp_broken__fail", {"name": "x"})
        died, echoed = await asyncio.gather(
            client.call_tool("mcp_broken__die", {"name": "marker"}),
            client.call_tool("mcp_good__echo", {"name": "still here"}),
        )
        after = await client.call_tool("mcp_good__echo", {"name": "after"})
        again = await client.call_tool("mcp_broken__die", {"name": "marker2"})
    assert failing.is_error is True and "the disk is full" in text_of(failing)
    assert died.is_error is True and again.is_error is True
    assert echoed.is_error is False and "still here" in text_of(echoed)
    assert after.is_error is False and "after" in text_of(after)


async def test_a_held_call_reports_progress_to_a_client_that_asked(gate: Gate, surfaces: Surfaces, new_id: Any) -> None:
    url = surfaces.start(EFFECTGATE_SURFACE_HOLD_S="3", EFFECTGATE_SURFACE_PROGRESS_S="1")
    progress: list[tuple[float, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    async with http_client(url, surfaces.token_of(gate.agent()), "legacy") as client:
        arguments = {"path": f"{new_id('p')}.txt", "content": "x"}
        result = await client.call_tool("file_system__write", arguments, progress_callback=on_progress)
    assert result.is_error is True and "pending approval" in text_of(result)
    assert len(progress) >= 2 and all((message or "").startswith("waiting for ") for _, message in progress)
    assert "waiting for approval ap-" in (progress[-1][1] or "")  # once decided, it names the approval
    assert [done for done, _ in progress] == sorted(done for done, _ in progress)
