"""Streamable HTTP upstreams: listed by the registry and called by the executor, headers sent, never logged."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from effectgate.devstack.timing import scaled
from effectgate.executor.adapters.mcp.client import McpToolHost
from effectgate.executor.errors import ToolRefused
from effectgate.registry.adapters.mcp_import import list_mcp_tools
from effectgate.shared.mcp.mapping import operation_from_mcp
from effectgate.shared.mcp.servers import McpServerConfig

pytestmark = pytest.mark.timing  # waits on the MCP server processes it starts (limits: scaled)

SERVER = Path(__file__).resolve().parents[4] / "tests" / "fixtures" / "mcp" / "http_server.py"
SECRET = "Bearer tok-7c1e2d9a4b5f6e3d8c2a1b0f9e8d7c6b"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real Streamable HTTP MCP server process; its URL and the log of Authorization headers it saw."""
    port, seen = free_port(), tmp_path / "headers.log"
    process = subprocess.Popen([sys.executable, str(SERVER), str(port), str(seen)])
    try:
        _wait_listening(port)
        yield f"http://127.0.0.1:{port}/mcp", seen
    finally:
        process.terminate()
        process.wait(timeout=10)


def _wait_listening(port: int, timeout_s: float = 20.0) -> None:
    for _ in range(int(scaled(timeout_s) / 0.05)):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"the HTTP MCP server did not listen on {port}")


async def test_an_http_upstream_is_listed_and_called_with_its_header_unlogged(
    upstream: tuple[str, Path], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    url, seen = upstream
    monkeypatch.setenv("TICKETS_AUTH", SECRET)
    caplog.set_level(logging.DEBUG)
    config = McpServerConfig(name="tickets", url=url, headers_env={"Authorization": "TICKETS_AUTH"})
    _, tools = await list_mcp_tools(config)
    expected = operation_from_mcp(config, next(tool for tool in tools if tool.name == "echo"))
    host = McpToolHost({"tickets": config})
    try:
        await host.start()
        result = await host.call("tickets", "echo", {"name": "ada"}, 10.0, expected)
    finally:
        await host.aclose()

    assert result["content"] == [{"type": "text", "text": "hello ada"}]
    assert set(seen.read_text().split("\n")) - {""} == {SECRET}
    assert not [record for record in caplog.records if "tok-7c1e2d9a" in record.getMessage()]


async def test_an_unset_header_variable_makes_the_server_unavailable_naming_it(
    upstream: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = upstream
    monkeypatch.delenv("TICKETS_AUTH", raising=False)
    config = McpServerConfig(name="tickets", url=url, headers_env={"Authorization": "TICKETS_AUTH"})
    host = McpToolHost({"tickets": config})
    try:
        await host.start()
        with pytest.raises(ToolRefused) as refused:
            await host.call("tickets", "echo", {"name": "ada"}, 10.0, _any_operation())
    finally:
        await host.aclose()

    assert refused.value.reason_code == "tool_unavailable"
    assert "TICKETS_AUTH" in refused.value.reason and "tickets" in refused.value.reason
    assert not seen.exists()  # nothing was sent without its header


def _any_operation() -> Any:
    """Never read: the call is refused before its operation is compared."""
    return None


def test_a_refused_url_names_the_field() -> None:
    with pytest.raises(ValueError, match="url: expected an http:// or https:// URL"):
        McpServerConfig(name="tickets", url="file:///etc/passwd")
