"""An MCP server that cannot be listed at start-up is tried again until its listing is published."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import sys
from pathlib import Path

import pytest

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.registry import importing
from effectgate.registry.adapters.mcp_import import import_mcp_server
from effectgate.registry.importing import McpImports
from effectgate.registry.ports import ServerImporter
from effectgate.shared.mcp.loading import parse_servers
from effectgate.shared.mcp.servers import McpServerConfig

FLAKY = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "mcp" / "flaky_server.py"
"""Refuses to start while a file named BROKEN is in its working directory."""


@pytest.fixture
def flaky(tmp_path: Path) -> Path:
    """A directory holding the server script (run by a relative path: the working directory is this one)."""
    shutil.copy(FLAKY, tmp_path / "flaky.py")
    (tmp_path / "BROKEN").write_text("")
    return tmp_path


def imports_of(directory: Path, importer: ServerImporter = import_mcp_server) -> McpImports:
    table = {"flaky": {"command": sys.executable, "args": ["flaky.py"]}}
    return McpImports(parse_servers(table, directory, "mcp.servers").values(), 20.0, importer)


async def published_by(imports: McpImports, timeout_s: float) -> ToolDescriptor:
    published: asyncio.Queue[ToolDescriptor] = asyncio.Queue()
    imports.keep_trying(published.put)
    try:
        return await asyncio.wait_for(published.get(), timeout_s)
    finally:
        await imports.aclose()


async def test_a_server_broken_at_start_up_is_published_once_it_starts(
    flaky: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(importing, "RETRY_FIRST_S", 0.2)
    imports = imports_of(flaky)
    with caplog.at_level(logging.INFO, logger="effectgate.registry"):
        assert await imports.first() == [] and imports.missing == ["flaky"]
    assert "its last line on stderr: refusing to start: BROKEN is present" in caplog.text

    (flaky / "BROKEN").unlink()
    descriptor = await published_by(imports, timeout_s=30.0)

    assert descriptor.name == "mcp_flaky" and list(descriptor.operations) == ["greet"]
    assert imports.missing == []


async def test_the_executors_ready_announcement_tries_a_missing_server_at_once(flaky: Path) -> None:
    imports = imports_of(flaky)  # the first retry would wait RETRY_FIRST_S; the announcement does not
    assert await imports.first() == []
    (flaky / "BROKEN").unlink()
    importing_task = asyncio.create_task(published_by(imports, timeout_s=importing.RETRY_FIRST_S + 15.0))
    await asyncio.sleep(0)

    imports.ready("mcp_flaky")
    imports.ready("mcp_other")  # another tool's announcement changes nothing

    assert (await importing_task).name == "mcp_flaky"


async def test_a_server_still_broken_is_tried_again_with_growing_delays(
    flaky: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importing, "RETRY_FIRST_S", 0.1)
    attempts: list[float] = []

    async def counted(config: McpServerConfig, timeout_s: float = 30.0) -> ToolDescriptor:
        attempts.append(asyncio.get_running_loop().time())
        return await import_mcp_server(config, timeout_s)

    imports = imports_of(flaky, counted)
    await imports.first()
    with pytest.raises(TimeoutError):
        await published_by(imports, timeout_s=6.0)

    gaps = [later - earlier for earlier, later in zip(attempts[1:], attempts[2:], strict=False)]
    assert len(attempts) >= 4 and gaps[-1] > gaps[0] + 0.1, attempts  # 0.1, 0.2, 0.4 … s, plus each start
    assert json.dumps(imports.missing) == '["flaky"]'


async def test_servers_that_hang_at_start_up_cost_one_timeout_together_not_one_each(tmp_path: Path) -> None:
    (tmp_path / "hang.py").write_text("import time\ntime.sleep(60)\n")
    table = {name: {"command": sys.executable, "args": ["hang.py"]} for name in ("one", "two", "three")}
    imports = McpImports(parse_servers(table, tmp_path, "mcp.servers").values(), 2.0, import_mcp_server)
    started = asyncio.get_running_loop().time()

    assert await imports.first() == []

    assert asyncio.get_running_loop().time() - started < 5.0  # 3 × 2 s one after another would be 6 s
    assert imports.missing == ["one", "three", "two"]


QUOTING = """
import os
from mcp.server.mcpserver import MCPServer
server = MCPServer("quoting", version=os.environ.get("IN_VERSION", "1.0.0"))

@server.tool(description="uses the key " + os.environ.get("IN_DESCRIPTION", "(none)"))
def look(name: str) -> str:
    return name

server.run()
"""


@pytest.mark.parametrize("where", ["IN_DESCRIPTION", "IN_VERSION"])
async def test_a_listing_quoting_a_configured_secret_is_refused_never_published(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    secret = "S3cr3tV4lu3QZXJ0123456789abcdefXYZ"
    (tmp_path / "quoting.py").write_text(QUOTING)
    value = f"1.0.0-{secret}" if where == "IN_VERSION" else secret
    table = {"quoting": {"command": sys.executable, "args": ["quoting.py"], "env": {"TOKEN": secret, where: value}}}
    imports = McpImports(parse_servers(table, tmp_path, "mcp.servers").values(), 20.0, import_mcp_server)

    with caplog.at_level(logging.ERROR, logger="effectgate.registry"):
        assert await imports.first() == []

    assert imports.missing == []  # refused for good: trying again would list the same
    assert "secret_in_listing" in caplog.text and secret not in caplog.text
