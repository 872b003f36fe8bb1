"""An MCP server's state travels: executor (announces) -> stream -> registry (records) -> listing and policy.

Real nats-server, real MCP server processes (``tests/fixtures/mcp/scripted_server.py``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import encode
from effectgate.contracts.tools.tool_states import ToolState, blocks
from effectgate.devstack.timing import scaled
from effectgate.executor.adapters.mcp.client import McpToolHost
from effectgate.executor.adapters.mcp.state_announcer import StateAnnouncer, state_event
from effectgate.executor.adapters.mcp.warden import ServerState
from effectgate.executor.errors import ToolOutcomeUnknown, ToolRefused
from effectgate.registry.adapters.mcp_import import import_mcp_server
from effectgate.registry.adapters.state_recorder import StateRecorder
from effectgate.registry.service import Registry
from effectgate.shared.mcp.servers import McpServerConfig
from effectgate.shared.secrets.detectors import find_secrets
from effectgate.shared.secrets.redaction import Redactor
from effectgate.shared.stores.tools_kv import ToolsBucket

pytestmark = [pytest.mark.connected, pytest.mark.timing]

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "scripted_server.py"
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": False}
TOKEN = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"


def scripted(workdir: Path, name: str, fail_text: str) -> McpServerConfig:
    tools = [
        {"name": "echo", "inputSchema": SCHEMA, "behaviour": "echo", "annotations": {"readOnlyHint": True}},
        {"name": "fail", "inputSchema": SCHEMA, "behaviour": "malformed_result", "message": fail_text},
    ]
    path = workdir / f"{name}.json"
    path.write_text(json.dumps({"version": "1.0.0", "workdir": str(workdir), "tools": tools}))
    return McpServerConfig(name=name, command=sys.executable, args=[str(SCRIPT), str(path)], trust_hints=True)


async def wait_for(check: Any, timeout_s: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + scaled(timeout_s)
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def test_a_degraded_server_is_recorded_listed_and_blocks_calls(
    nc: Client, js: JetStreamContext, ns: str, tmp_path: Path
) -> None:
    name = f"s{ns.lower()[:12]}"
    tool, config = f"mcp_{name}", scripted(tmp_path, name, f"the disk is full; token {TOKEN}")
    bucket = await ToolsBucket.open(js)
    registry = Registry(bucket, lambda subject, event: asyncio.sleep(0), lambda: datetime.now(UTC))
    await registry.publish_listing(await import_mcp_server(config))
    recorder = StateRecorder(bucket)

    async def on_state(msg: Msg) -> None:
        await recorder.record(msg.subject, msg.data)

    subscription = await nc.subscribe(Subjects.TOOL_STATES, cb=on_state)
    announcer = StateAnnouncer(Redactor(find_secrets, [TOKEN]), cool_down_s=30.0)
    announcer.start(js)
    host = McpToolHost({name: config}, breaker_faults=2, breaker_cool_down_s=30.0, on_change=announcer.note)
    try:
        await host.start()
        await wait_for(lambda: _is(bucket, tool, "ready"))
        expected = (await bucket.get(tool)).operations  # type: ignore[union-attr]
        for _ in range(2):  # broken replies: faults of the server (a tool's own error answer would not be)
            with pytest.raises(ToolOutcomeUnknown):
                await host.call(name, "fail", {"name": "x"}, 10.0, expected["fail"])
        with pytest.raises(ToolRefused) as refused:
            await host.call(name, "echo", {"name": "x"}, 10.0, expected["echo"])
        await wait_for(lambda: _is(bucket, tool, "degraded"))

        listed = (await registry.list()).states or {}
        state = listed[tool]
        assert refused.value.reason_code == "tool_unavailable"
        assert state.state == "degraded" and "2 consecutive faults (last: malformed_reply)" in state.reason
        assert state.probe_at is not None and blocks(state, datetime.now(UTC))
        assert (await bucket.get(tool)).version == "1.0.0"  # type: ignore[union-attr]  # versions untouched
    finally:
        await host.aclose()
        await announcer.stop()
        await subscription.unsubscribe()


async def test_the_registry_catches_up_from_the_stream_and_ignores_a_mislabelled_state(
    js: JetStreamContext, ns: str
) -> None:
    name = f"c{ns.lower()[:12]}"
    tool = f"mcp_{name}"
    notes = McpServerConfig(name=name, command=sys.executable, args=["-c", "import sys; sys.exit(1)"])
    announcer = StateAnnouncer(Redactor(find_secrets, []), cool_down_s=30.0)
    announcer.start(js)
    host = McpToolHost({name: notes}, on_change=announcer.note)
    bucket = await ToolsBucket.open(js)
    try:
        await host.start()
        await asyncio.sleep(0.5)  # the announcement reaches the stream; no registry listens
        assert await bucket.state(tool) is None

        await StateRecorder(bucket).catch_up(js)
        recorded = await bucket.state(tool)
        assert recorded is not None and recorded.state == "unavailable"
        assert "ended its connection during start-up" in recorded.reason
        registry = Registry(bucket, lambda subject, event: asyncio.sleep(0), lambda: datetime.now(UTC))
        listing = await registry.list()  # never listed, so never registered: its state is listed all the same
        assert tool not in {descriptor.name for descriptor in listing.descriptors or []}
        assert (listing.states or {})[tool] == recorded

        ready = ServerState(state="ready", reason="1 tool", since=datetime.now(UTC))
        another = encode(state_event(f"{name}x", ready, Redactor(find_secrets, []), 30.0))  # names mcp_<name>x
        malformed = b'{"type":"tool.state.changed"}'
        assert not await StateRecorder(bucket).record(Subjects.tool_state(tool), another)
        assert not await StateRecorder(bucket).record(Subjects.tool_state(tool), malformed)
        assert await bucket.state(tool) == recorded
    finally:
        await host.aclose()
        await announcer.stop()


async def _is(bucket: ToolsBucket, tool: str, state: str) -> bool:
    found: ToolState | None = await bucket.state(tool)
    return found is not None and found.state == state
