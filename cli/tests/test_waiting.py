"""While a stack starts it says what it waits for, once each; a timeout names the service and why.

Connected: a real nats-server with nobody serving (the service awaited never answers), a
``/readyz`` served by the test as a service's own would be, and the MCP servers files and
``effectgate.toml`` the services would read.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from nats.aio.msg import Msg

from effectgate.cli.stack.ports import Ports
from effectgate.cli.stack.readiness import wait_ready
from effectgate.cli.stack.supervise import SupervisionSettings
from effectgate.cli.stack.system import Stack
from effectgate.cli.stack.waiting import Said, configured_servers, mcp_settled
from effectgate.contracts.bus.catalog import Rpc

pytestmark = pytest.mark.connected


async def _readyz(reasons: dict[str, str]) -> tuple[web.AppRunner, int]:
    async def answer(_: web.Request) -> web.Response:
        return web.json_response({"ready": False, "not_ready": reasons}, status=503)

    app = web.Application()
    app.router.add_get("/readyz", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("reasons", "why"),
    [
        (
            {"consumers": "starting: connecting and building", "mcp_imports": "listing MCP servers: git"},
            "listing MCP servers: git",
        ),
        ({"consumers": "starting: 0 of 2 durable consumers bound"}, "starting: 0 of 2 durable consumers bound"),
        (
            {"mcp_servers": "MCP servers still starting: a, b", "redis": "Redis does not answer"},
            "MCP servers still starting: a, b; Redis does not answer",
        ),
    ],
)
async def test_the_wait_says_what_the_service_waits_for_and_its_timeout_names_it(
    nats_url: str, tmp_path: Path, reasons: dict[str, str], why: str
) -> None:
    runner, port = await _readyz(reasons)
    stack = Stack(tmp_path, nats_url, "redis://unused", {}, ports=Ports(chosen={"registry": port}))
    said: list[str] = []
    try:
        with pytest.raises(TimeoutError) as late:
            await wait_ready(stack, ("registry",), 1.5, note=said.append)
    finally:
        await runner.cleanup()

    assert said == [f"waiting for registry: {why}"]
    assert str(late.value) == f"registry not ready after 1.5 s: {why}"


async def test_without_a_health_port_the_wait_names_the_service_alone(nats_url: str, tmp_path: Path) -> None:
    said: list[str] = []

    with pytest.raises(TimeoutError, match=r"^registry not ready after 0.5 s$"):
        await wait_ready(Stack(tmp_path, nats_url, "redis://unused", {}), ("registry",), 0.5, note=said.append)

    assert said == ["waiting for registry"]


def test_a_line_is_said_once_until_another_is_said() -> None:
    said: list[str] = []
    say = Said(said.append)
    for line in ("a", "a", "b", "b", "a"):
        say(line)
    assert said == ["a", "b", "a"]


def test_the_servers_awaited_are_those_the_services_run(tmp_path: Path) -> None:
    servers = tmp_path / "servers.toml"
    servers.write_text(f'[servers.b]\ncommand = "{sys.executable}"\n[servers.a]\ncommand = "{sys.executable}"\n')
    config = tmp_path / "effectgate.toml"
    config.write_text(f'[mcp.servers.c]\ncommand = "{sys.executable}"\n')

    assert configured_servers({"EFFECTGATE_MCP_SERVERS_FILE": str(servers), "EFFECTGATE_CONFIG": str(config)}) == [
        "a",
        "b",
    ]
    assert configured_servers({"EFFECTGATE_EXECUTOR_MCP_SERVERS_FILE": str(servers)}) == ["a", "b"]
    assert configured_servers({"EFFECTGATE_CONFIG": str(config)}) == ["c"]
    assert configured_servers({"EFFECTGATE_CONFIG": str(tmp_path / "missing.toml")}) == []
    assert configured_servers({}) == []


def test_the_ready_timeout_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SupervisionSettings().ready_timeout_s == 120.0
    monkeypatch.setenv("EFFECTGATE_UP_READY_TIMEOUT_S", "300")
    assert SupervisionSettings().ready_timeout_s == 300.0
    monkeypatch.setenv("EFFECTGATE_UP_READY_TIMEOUT_S", "0")
    with pytest.raises(ValueError, match="ready_timeout_s"):
        SupervisionSettings()


async def _registry_answering(nc: Any, states: dict[str, dict[str, Any]]) -> Any:
    """A stand-in for the registry's ``tg.registry.list``: the recorded states given (as announced)."""

    async def answer(msg: Msg) -> None:
        await msg.respond(json.dumps({"ok": True, "reason_code": "found", "reason": "", "states": states}).encode())

    return await nc.subscribe(Rpc.REGISTRY_LIST, cb=answer)


def _state(state: str, since: datetime) -> dict[str, Any]:
    return {"state": state, "reason": "why", "since": since.isoformat()}


@pytest.mark.parametrize(
    ("recorded", "left"),
    [
        ({"mcp_slow": "starting", "mcp_fast": "ready"}, ["slow"]),
        ({"mcp_fast": "ready"}, ["slow"]),  # not announced yet
        ({"mcp_slow": "stale", "mcp_fast": "ready"}, ["slow"]),  # recorded by an earlier run
        ({"mcp_slow": "unavailable", "mcp_fast": "ready"}, []),  # broken: listed so, not awaited
        ({"mcp_slow": "ready", "mcp_fast": "degraded"}, []),
    ],
)
async def test_mcp_servers_still_starting_at_the_deadline_are_named_and_nothing_is_raised(
    nats_url: str, nc: Any, tmp_path: Path, recorded: dict[str, str], left: list[str]
) -> None:
    servers = tmp_path / "servers.toml"
    servers.write_text(f'[servers.slow]\ncommand = "{sys.executable}"\n[servers.fast]\ncommand = "{sys.executable}"\n')
    since = datetime.now(UTC)
    states = {
        tool: _state("ready", since - timedelta(hours=1))
        if state == "stale"
        else _state(state, since + timedelta(seconds=1))
        for tool, state in recorded.items()
    }
    stack = Stack(tmp_path, nats_url, "redis://unused", {"EFFECTGATE_MCP_SERVERS_FILE": str(servers)})
    said: list[str] = []
    subscription = await _registry_answering(nc, states)
    try:
        started = time.monotonic()
        still = await mcp_settled(stack, since, time.monotonic() + 1.0, Said(said.append))
    finally:
        await subscription.unsubscribe()

    assert still == left
    assert said == (["waiting for MCP server slow to start"] if left else [])
    assert time.monotonic() - started < (5.0 if left else 1.0)
