"""Rate limits that protect, not punish, on a running system.

A call's budget is taken when it is admitted to run: a direct call at its decision, a
granted call at the re-check right before its effect, once. Waiting, rejected and expired
approvals take nothing. Limits are per tool and per operation (including imported MCP
tools, from the servers' TOML), and a ``rate_limited`` receipt says when to retry.

The module's stack publishes ``file_system`` with its own budget for ``list`` (2 per
60 s; the tool's 5 per 60 s for the other operations) and an MCP server ``ticker`` whose
TOML gives the server 3 calls per 60 s and its tool ``ping`` 1 of its own.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from effectgate.contracts.tools.descriptors import RateLimit

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "scripted_server.py"
READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
TOOL_CALLS = 5
LIST_CALLS = 2
APPROVAL_TTL_S = 15.0


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Any, repo_root: Path) -> dict[str, str]:
    base = Path(e2e_paths.state).parent
    tools, mcp = base / "tools", base / "mcp"
    tools.mkdir(exist_ok=True)
    mcp.mkdir(exist_ok=True)
    descriptor = json.loads((repo_root / "deploy/tools/file_system.json").read_text())
    assert descriptor["rate_limit"] == {"calls": TOOL_CALLS, "period_s": 60}
    descriptor["operations"]["list"]["rate_limit"] = {"calls": LIST_CALLS, "period_s": 60}
    (tools / "file_system.json").write_text(json.dumps(descriptor))
    listed = [
        {"name": name, "description": name, "inputSchema": NAME, "annotations": READ_ONLY} for name in ("echo", "ping")
    ]
    (mcp / "ticker.json").write_text(json.dumps({"version": "1.0.0", "workdir": str(mcp), "tools": listed}))
    arguments = json.dumps([str(SCRIPT), str(mcp / "ticker.json")])
    (mcp / "servers.toml").write_text(
        f'[servers.ticker]\ncommand = "{sys.executable}"\nargs = {arguments}\ntrust_hints = true\n'
        "rate_limit = { calls = 3, period_s = 60 }\n"
        "[servers.ticker.overrides.ping]\nrate_limit = { calls = 1, period_s = 60 }\n"
    )
    return {
        "EFFECTGATE_REGISTRY_DESCRIPTORS_DIR": str(tools),
        "EFFECTGATE_REGISTRY_MCP_SERVERS_FILE": str(mcp / "servers.toml"),
        "EFFECTGATE_EXECUTOR_MCP_SERVERS_FILE": str(mcp / "servers.toml"),
        "EFFECTGATE_APPROVALS_TTL_S": str(APPROVAL_TTL_S),
        "EFFECTGATE_APPROVALS_SWEEP_INTERVAL_S": "0.5",
    }


async def _reads(gate: Any, agent: str, count: int) -> list[str]:
    return [(await gate.call(agent, "read", {"path": "hello.txt"})).reason_code for _ in range(count)]


async def _pending_writes(gate: Any, agent: str, count: int, new_id: Any) -> list[dict[str, Any]]:
    ids = [await gate.submit(agent, "write", {"path": new_id("w-") + ".txt", "content": "x"}) for _ in range(count)]
    return [await gate.pending(request_id) for request_id in ids]


def _limited(issued: Any) -> None:
    assert (issued.outcome, issued.reason_code) == ("denied", "rate_limited"), issued.reason
    assert issued.retry_after_s is not None and 0 < issued.retry_after_s <= 60.0, issued.retry_after_s
    assert issued.result is None


async def test_pending_and_rejected_approvals_take_nothing(gate: Any, new_id: Any) -> None:
    agent = gate.agent(1)
    pending = await _pending_writes(gate, agent, TOOL_CALLS, new_id)

    assert await _reads(gate, agent, 1) == ["ok"], "writes waiting for approval used up the budget"
    for approval in pending:
        assert (await gate.decide("alice", approval["approval_id"], approve=False))["ok"]
    for approval in pending:
        assert (await gate.receipt(agent, approval["request_id"])).reason_code == "approval_rejected"

    assert await _reads(gate, agent, TOOL_CALLS - 1) == ["ok"] * (TOOL_CALLS - 1)
    _limited(await gate.call(agent, "read", {"path": "hello.txt"}))  # rejections gave nothing back: none was taken


async def test_expired_approvals_take_nothing(gate: Any, new_id: Any) -> None:
    agent = gate.agent(1)
    pending = await _pending_writes(gate, agent, 3, new_id)
    for approval in pending:
        issued = await gate.receipt(agent, approval["request_id"], timeout_s=APPROVAL_TTL_S + 20)
        assert issued.reason_code == "approval_expired", issued.reason

    assert await _reads(gate, agent, TOOL_CALLS) == ["ok"] * TOOL_CALLS
    _limited(await gate.call(agent, "read", {"path": "hello.txt"}))


async def test_a_granted_write_takes_one_call_when_it_runs(gate: Any, new_id: Any) -> None:
    agent, name = gate.agent(1), new_id("granted-") + ".txt"
    request_id = await gate.submit(agent, "write", {"path": name, "content": "x"})
    approval = await gate.pending(request_id)
    assert (await gate.decide("alice", approval["approval_id"]))["ok"]
    assert (await gate.receipt(agent, request_id)).outcome == "succeeded"

    assert await _reads(gate, agent, TOOL_CALLS - 1) == ["ok"] * (TOOL_CALLS - 1), "the grant was counted twice"
    _limited(await gate.call(agent, "read", {"path": "hello.txt"}))


async def test_a_grant_over_the_rate_at_the_moment_of_effect_is_denied_and_runs_nothing(gate: Any, new_id: Any) -> None:
    agent, name = gate.agent(1), new_id("late-") + ".txt"
    request_id = await gate.submit(agent, "write", {"path": name, "content": "x"})
    approval = await gate.pending(request_id)
    assert await _reads(gate, agent, TOOL_CALLS) == ["ok"] * TOOL_CALLS

    reply = await gate.decide("alice", approval["approval_id"])
    assert reply["ok"], "an approval was refused for a rate that may be free by the time the call runs"
    issued = await gate.receipt(agent, request_id)

    _limited(issued)
    assert "file_system" in issued.reason
    await gate.settle()
    assert not (gate.paths.sandbox / name).exists()


async def test_a_burst_over_an_operations_limit_leaves_other_operations_and_tools_alone(gate: Any, new_id: Any) -> None:
    agent = gate.agent(1)
    lists = [await gate.call(agent, "list", {"path": "."}) for _ in range(LIST_CALLS)]
    assert [issued.outcome for issued in lists] == ["succeeded"] * LIST_CALLS

    burst = await asyncio.gather(*(gate.call(agent, "list", {"path": "."}) for _ in range(3)))
    for issued in burst:
        _limited(issued)
        assert "file_system.list" in issued.reason
    assert await _reads(gate, agent, TOOL_CALLS) == ["ok"] * TOOL_CALLS, "the list burst used the tool's budget"
    other_tool = await gate.call(agent, "echo", {"name": "x"}, tool="mcp_ticker", timeout_s=60.0)
    assert other_tool.outcome == "succeeded", other_tool.reason


async def test_an_mcp_servers_rate_limits_come_from_its_toml(gate: Any) -> None:
    agent = gate.agent(1)
    client = await gate.client(agent)
    descriptor = await client.describe("mcp_ticker")
    assert descriptor.rate_limit == RateLimit(calls=3, period_s=60.0)
    assert descriptor.operations["ping"].rate_limit == RateLimit(calls=1, period_s=60.0)
    assert descriptor.operations["echo"].rate_limit is None

    echoes = [await gate.call(agent, "echo", {"name": f"e{n}"}, tool="mcp_ticker", timeout_s=60.0) for n in range(4)]
    assert [issued.outcome for issued in echoes[:3]] == ["succeeded"] * 3
    _limited(echoes[3])
    pings = [await gate.call(agent, "ping", {"name": f"p{n}"}, tool="mcp_ticker", timeout_s=60.0) for n in range(2)]
    assert pings[0].outcome == "succeeded", "ping has a budget of its own, not the server's spent one"
    _limited(pings[1])
    assert "mcp_ticker.ping" in pings[1].reason
