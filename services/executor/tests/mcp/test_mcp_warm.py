"""Servers kept warm: started before the first call, restarted when they die, refused at once when not ready."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Any

import pytest

from effectgate.devstack.timing import scaled
from effectgate.executor.adapters.mcp.breaker import Breaker
from effectgate.executor.adapters.mcp.client import McpToolHost
from effectgate.executor.adapters.mcp.session import McpSession
from effectgate.executor.adapters.mcp.warden import Backoff, ServerState, Warden
from effectgate.executor.errors import ToolFailed, ToolOutcomeUnknown, ToolRefused
from effectgate.shared.mcp.servers import McpServerConfig

from .test_mcp_outcomes import WRITE, call, started

pytestmark = pytest.mark.timing  # waits on the MCP server processes it starts (limits: scaled)

READ = {"readOnlyHint": True}
DIES = "import sys; print('notes: NOTES_DIR is not set', file=sys.stderr); sys.exit(1)"


async def wait_for(predicate: Any, timeout_s: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + scaled(timeout_s)
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


@pytest.fixture
def git(mcp_servers: Any) -> Any:
    tools = [
        mcp_servers.tool("echo", annotations=READ),
        mcp_servers.tool("fail", "malformed_result", annotations=WRITE),
        mcp_servers.tool("refuse", "is_error", annotations=WRITE),
    ]
    return mcp_servers("git", tools, trust_hints=True)


async def test_servers_start_before_the_first_call_and_a_dead_one_names_itself(
    git: Any, caplog: pytest.LogCaptureFixture
) -> None:
    notes = McpServerConfig(name="notes", command=sys.executable, args=["-c", DIES])
    host = McpToolHost({"git": git.config, "notes": notes})
    caplog.set_level(logging.INFO, "effectgate.executor")
    try:
        await host.start()
        assert len(started(git.workdir)) == 1  # started by start(), before any call

        with pytest.raises(ToolRefused) as refused:
            await call(host, git_like(notes), "anything", {})
        result = await call(host, git, "echo", {"name": "x"})

        assert refused.value.reason_code == "tool_unavailable"
        assert "notes" in refused.value.reason and "NOTES_DIR is not set" in refused.value.reason
        assert result["structured"] == {"arguments": {"name": "x"}}
        assert len(started(git.workdir)) == 1
        assert {name: state.state for name, state in host.states().items()} == {"git": "ready", "notes": "unavailable"}
        lines = [record.getMessage() for record in caplog.records]
        assert any(line.startswith("mcp server git: ready (3 tools, ") for line in lines), lines
        assert any(line.startswith("mcp server notes: unavailable: ") and "NOTES_DIR" in line for line in lines), lines
    finally:
        await host.aclose()


def git_like(config: McpServerConfig) -> Any:
    """A stand-in for a scripted server whose tool is never reached (the call is refused first)."""

    class Unreached:
        def registered(self, _: str) -> Any:
            return None

    unreached = Unreached()
    unreached.config = config  # type: ignore[attr-defined]
    return unreached


async def test_a_killed_server_is_restarted_and_serves_again(git: Any) -> None:
    changes: list[tuple[str, ServerState]] = []
    host = McpToolHost({"git": git.config}, on_change=lambda name, state: changes.append((name, state)))
    try:
        await host.start()
        (first,) = started(git.workdir)

        os.kill(int(first), signal.SIGKILL)
        await wait_for(lambda: len(started(git.workdir)) == 2 and host.states()["git"].state == "ready")
        result = await call(host, git, "echo", {"name": "again"})

        assert result["structured"] == {"arguments": {"name": "again"}}
        assert [state.state for _, state in changes] == ["starting", "ready", "unavailable", "ready"]
        assert "connection_lost" in changes[2][1].reason
    finally:
        await host.aclose()


async def test_a_failing_tool_opens_the_circuit_and_a_probe_closes_it(git: Any) -> None:
    changes: list[ServerState] = []
    host = McpToolHost(
        {"git": git.config}, breaker_faults=3, breaker_cool_down_s=0.5, on_change=lambda _, s: changes.append(s)
    )
    try:
        await host.start()
        for _ in range(3):
            with pytest.raises(ToolOutcomeUnknown):
                await call(host, git, "fail", {"name": "x"})

        with pytest.raises(ToolRefused) as refused:
            await call(host, git, "echo", {"name": "x"})
        assert host.states()["git"].state == "degraded"
        assert refused.value.reason_code == "tool_unavailable"
        assert "3 consecutive faults" in refused.value.reason

        await asyncio.sleep(0.6)
        await call(host, git, "echo", {"name": "probe"})

        assert host.states()["git"].state == "ready"
        assert [state.state for state in changes] == ["starting", "ready", "degraded", "ready"]
        assert changes[-1].reason == "its probe call succeeded"
    finally:
        await host.aclose()


async def test_a_tool_answering_with_errors_never_takes_its_servers_other_tools_down(git: Any) -> None:
    host = McpToolHost({"git": git.config}, breaker_faults=2, breaker_cool_down_s=30.0)
    try:
        await host.start()
        for _ in range(5):
            with pytest.raises(ToolFailed) as failed:
                await call(host, git, "refuse", {"name": "x"})
            assert failed.value.reason_code == "tool_error"
        assert (await call(host, git, "echo", {"name": "still served"})) is not None
        assert host.states()["git"].state == "ready"
    finally:
        await host.aclose()


async def test_a_failed_probe_opens_the_circuit_again(git: Any) -> None:
    host = McpToolHost({"git": git.config}, breaker_faults=1, breaker_cool_down_s=0.3)
    try:
        await host.start()
        with pytest.raises(ToolOutcomeUnknown):
            await call(host, git, "fail", {"name": "x"})
        await asyncio.sleep(0.4)
        with pytest.raises(ToolOutcomeUnknown):
            await call(host, git, "fail", {"name": "probe"})

        with pytest.raises(ToolRefused):
            await call(host, git, "echo", {"name": "x"})
        assert host.states()["git"].state == "degraded"
    finally:
        await host.aclose()


async def test_a_server_still_starting_is_announced_so_and_refuses_its_calls_saying_so(mcp_servers: Any) -> None:
    slow = mcp_servers("slow", [mcp_servers.tool("echo", annotations=READ)], trust_hints=True)
    changes: list[ServerState] = []
    host = McpToolHost({"slow": slow.config}, on_change=lambda _, state: changes.append(state))
    try:
        host.launch()  # as the executor does: it takes calls while its servers start

        with pytest.raises(ToolRefused) as refused:
            await call(host, slow, "echo", {"name": "early"})
        first = changes[0]
        await wait_for(lambda: host.states()["slow"].state == "ready")
        result = await call(host, slow, "echo", {"name": "later"})
    finally:
        await host.aclose()

    assert (first.state, first.reason) == ("starting", "its first start is under way")
    assert refused.value.reason_code == "tool_unavailable"
    assert refused.value.reason == "MCP server 'slow' is starting: its first start is under way"
    assert result["structured"] == {"arguments": {"name": "later"}}


@pytest.mark.parametrize(
    ("delay_s", "served_s", "expected_s"),
    [(None, 0.0, 0.5), (0.5, 0.0, 1.0), (16.0, 3.0, 30.0), (30.0, 9.9, 30.0), (30.0, 10.0, 0.5), (4.0, 600.0, 0.5)],
)
def test_the_restart_delay_doubles_until_a_connection_served_the_healthy_period(
    delay_s: float | None, served_s: float, expected_s: float
) -> None:
    assert Backoff().after(delay_s, served_s) == expected_s


async def _crash_series(git: Any, warden: Warden, delays: list[float], failed_starts: int) -> None:
    """Kill the serving server while every start fails, until ``failed_starts`` restarts were waited for."""
    git.change(startup="exit")
    os.kill(int(started(git.workdir)[-1]), signal.SIGKILL)
    await wait_for(lambda: len(delays) >= failed_starts, timeout_s=90.0)  # each start is a Python process
    git.change(startup="normal")
    await wait_for(lambda: warden.state.state == "ready", timeout_s=30.0)


@pytest.mark.parametrize("healthy", [True, False], ids=["served-the-healthy-period", "crashed-at-once"])
async def test_a_crash_after_the_healthy_period_restarts_at_the_first_delay_a_crash_loop_keeps_backing_off(
    git: Any, healthy: bool
) -> None:
    delays: list[float] = []

    async def recorded(delay_s: float) -> None:
        delays.append(delay_s)
        await asyncio.sleep(delay_s)

    backoff = Backoff(first_s=0.05, max_s=0.4, healthy_s=1.5)
    session = McpSession(git.config, 30.0)
    warden = Warden(session, Breaker(5, 30.0), backoff=backoff, sleep=recorded)
    warden.start()
    try:
        await wait_for(lambda: warden.state.state == "ready")
        await _crash_series(git, warden, delays, failed_starts=5)
        assert delays[:5] == [0.05, 0.1, 0.2, 0.4, 0.4]
        if healthy:
            await asyncio.sleep(backoff.healthy_s)
        waited = len(delays)

        os.kill(int(started(git.workdir)[-1]), signal.SIGKILL)
        await wait_for(lambda: len(delays) > waited and warden.state.state == "ready", timeout_s=30.0)

        assert delays[waited] == (backoff.first_s if healthy else backoff.max_s)
    finally:
        await warden.stop()
        await session.stop()
