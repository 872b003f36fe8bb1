"""A stack configured by one effectgate.toml (EFFECTGATE_CONFIG, no MCP variable): the registry and the
executor read the same MCP servers, the operator's limits reach the descriptor, and a changed
listing is published as a new version when the registry restarts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from effectgate.cli.stack.readiness import wait_ready
from effectgate.contracts.bus.catalog import Rpc

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "scripted_server.py"
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}


def write_listing(directory: Path, *names: str) -> None:
    tools = [
        {"name": name, "description": f"{name} tool", "inputSchema": NAME, "annotations": READ_ONLY} for name in names
    ]
    document = {"version": "1.0.0", "workdir": str(directory), "tools": tools}
    (directory / "listing.json").write_text(json.dumps(document))


@pytest.fixture(scope="module")
def mcp_dir(e2e_paths: Any) -> Path:
    directory = Path(e2e_paths.state).parent / "configured"
    directory.mkdir(exist_ok=True)
    return directory


@pytest.fixture(scope="module")
def stack_env(mcp_dir: Path) -> dict[str, str]:
    write_listing(mcp_dir, "echo")
    config = mcp_dir / "effectgate.toml"
    arguments = json.dumps([str(SCRIPT), str(mcp_dir / "listing.json")])
    # The limit is well above the default 30 s: the server starts inside the first call.
    config.write_text(
        f'[mcp.servers.cfg]\ncommand = "{sys.executable}"\nargs = {arguments}\ntrust_hints = true\n\n'
        "[tools.limits.mcp_cfg]\ntimeout_s = 45\n"
    )
    return {"EFFECTGATE_CONFIG": str(config)}


async def latest(gate: Any) -> dict[str, Any]:
    reply = await gate.rpc(Rpc.REGISTRY_GET, {"tool": "mcp_cfg"})
    assert reply["ok"], reply
    return dict(reply["descriptor"])


async def test_an_mcp_call_succeeds_with_only_the_config_file(gate: Any) -> None:
    receipt = await gate.call(gate.agent(1), "echo", {"name": "x"}, tool="mcp_cfg", timeout_s=60.0)

    assert receipt.outcome == "succeeded", receipt.reason
    assert (await latest(gate))["timeout_s"] == 45.0


async def test_a_changed_listing_is_a_new_version_after_a_registry_restart(gate: Any, mcp_dir: Path) -> None:
    before = await latest(gate)
    write_listing(mcp_dir, "echo", "shout")

    gate.stack.stop("registry")
    gate.stack.start("registry")
    await wait_ready(gate.stack, ("registry",))

    after = await latest(gate)
    assert (before["version"], after["version"]) == ("1.0.0", "1.0.1")
    assert sorted(after["operations"]) == ["echo", "shout"] and after["timeout_s"] == 45.0
    receipt = await gate.call(gate.agent(1), "shout", {"name": "y"}, tool="mcp_cfg", timeout_s=60.0)
    assert receipt.outcome == "succeeded", receipt.reason
