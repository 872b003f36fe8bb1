"""How MCP calls end when servers misbehave: each fault maps to one error class, never CancelledError."""

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession

from effectgate.executor.adapters.mcp.client import McpToolHost
from effectgate.executor.adapters.mcp.connection import Connection
from effectgate.executor.errors import ExecutorError, ToolFailed, ToolOutcomeUnknown, ToolTimeout

WRITE = {"readOnlyHint": False, "destructiveHint": False}


def healthy(mcp_servers: Any) -> Any:
    return mcp_servers("healthy", [mcp_servers.tool("echo", annotations={"readOnlyHint": True})], trust_hints=True)


async def call(host: McpToolHost, server: Any, tool: str, arguments: dict[str, Any], timeout_s: float = 10.0) -> Any:
    return await host.call(server.config.name, tool, arguments, timeout_s, server.registered(tool))


async def outcome(host: McpToolHost, server: Any, tool: str, timeout_s: float = 10.0) -> BaseException | Any:
    """The call's result or the exception it raised, CancelledError included."""
    try:
        return await call(host, server, tool, {"name": f"{tool}.marker"}, timeout_s)
    except BaseException as exc:
        return exc


def started(workdir: Path) -> list[str]:
    """The process ids the scripted server logged at each start."""
    log = workdir / "starts.log"
    return log.read_text().split() if log.exists() else []


def alive(pid: str) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def assert_ended(result: BaseException | Any, kind: type[ExecutorError], code: str) -> None:
    assert isinstance(result, kind), repr(result)
    assert result.reason_code == code, result.reason


@pytest.fixture
async def faulty(mcp_servers: Any) -> Any:
    tools = [
        mcp_servers.tool("touch", "touch", annotations=WRITE),
        mcp_servers.tool("touch_then_die", "touch_then_die", annotations=WRITE),
        mcp_servers.tool("rpc_error", "rpc_error", annotations=WRITE),
        mcp_servers.tool("is_error", "is_error", annotations=WRITE),
        mcp_servers.tool("garbage", "garbage", annotations=WRITE),
        mcp_servers.tool("malformed_result", "malformed_result", annotations=WRITE),
        mcp_servers.tool("hang", "hang", annotations=WRITE),
        mcp_servers.tool(
            "bad_structured",
            "bad_structured",
            annotations=WRITE,
            outputSchema={"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
        ),
    ]
    return mcp_servers("faulty", tools)


@pytest.fixture
async def host(faulty: Any, mcp_servers: Any) -> Any:
    tool_host = McpToolHost({"faulty": faulty.config, "healthy": healthy(mcp_servers).config}, start_timeout_s=20.0)
    yield tool_host
    await tool_host.aclose()


@pytest.mark.parametrize(
    ("tool", "kind", "code", "effect"),
    [
        ("touch_then_die", ToolOutcomeUnknown, "connection_lost", True),
        ("garbage", ToolOutcomeUnknown, "malformed_reply", False),
        ("malformed_result", ToolOutcomeUnknown, "malformed_reply", False),
        ("bad_structured", ToolOutcomeUnknown, "output_invalid", False),
        ("rpc_error", ToolFailed, "tool_error", False),
        ("is_error", ToolFailed, "tool_error", False),
    ],
)
async def test_a_sent_call_ends_by_what_the_server_did(
    host: McpToolHost, faulty: Any, tool: str, kind: type[ExecutorError], code: str, effect: bool
) -> None:
    result = await outcome(host, faulty, tool)

    assert_ended(result, kind, code)
    assert (faulty.workdir / f"{tool}.marker").exists() is effect
    again = await call(host, faulty, "touch", {"name": "after.marker"})  # the session is usable again
    assert again["content"][0]["text"] == '{"touched": "after.marker"}'


async def test_the_servers_own_error_text_is_the_reason(host: McpToolHost, faulty: Any) -> None:
    rpc = await outcome(host, faulty, "rpc_error")
    flagged = await outcome(host, faulty, "is_error")

    assert isinstance(rpc, ToolFailed) and rpc.reason == "quota exceeded, nothing was done"
    assert isinstance(flagged, ToolFailed) and flagged.reason == '"the disk is full"'


@pytest.mark.parametrize(
    ("message", "kept"),
    [
        ("denied, token=s3cr3t-value-123 " + "x" * 900, "denied, token=s3cr3t-value-123…"),
        ("word " * 59 + "postgres://admin:hunter2@db/x", "word " * 58 + "word…"),
        ("x" * 900, "…"),
    ],
    ids=["long-tail", "token-at-the-cut", "one-long-token"],
)
async def test_server_text_is_clipped_at_a_whitespace_never_inside_a_token(
    host: McpToolHost, faulty: Any, message: str, kept: str
) -> None:
    """The outlet scrubs whole tokens: a clip must not leave half of one (``hunter2`` without its ``@``)."""
    faulty.change_tool("rpc_error", behaviour="rpc_error", message=message)

    result = await outcome(host, faulty, "rpc_error")

    assert isinstance(result, ToolFailed) and result.reason_code == "tool_error"
    assert result.reason == kept and len(result.reason) <= 300


async def test_no_answer_after_sending_is_a_timeout(host: McpToolHost, faulty: Any) -> None:
    await call(host, faulty, "touch", {"name": "warm.marker"})  # started: the limit below is the call's own
    begun = asyncio.get_running_loop().time()

    result = await outcome(host, faulty, "hang", timeout_s=1.0)

    assert_ended(result, ToolTimeout, "tool_timeout")
    assert asyncio.get_running_loop().time() - begun < 1.0  # answered before a caller's own 1 s limit


async def test_hung_start_then_a_second_call_right_after(host: McpToolHost, faulty: Any, mcp_servers: Any) -> None:
    """An imported server that now never answers its handshake: every call gets its own clear failure."""
    faulty.change(startup="hang")

    first = await outcome(host, faulty, "touch", timeout_s=1.0)
    second = await outcome(host, faulty, "touch", timeout_s=1.0)

    assert_ended(first, ToolFailed, "server_unavailable")
    assert_ended(second, ToolFailed, "server_unavailable")
    assert not (faulty.workdir / "touch.marker").exists()
    assert (await call(host, healthy(mcp_servers), "echo", {}))["structured"] == {"arguments": {}}


async def test_start_that_outlives_its_limit_fails_and_the_next_call_starts_anew(faulty: Any) -> None:
    faulty.change(startup="hang")
    tool_host = McpToolHost({"faulty": faulty.config}, start_timeout_s=2.0)
    loop = asyncio.get_running_loop()
    try:
        begun = loop.time()
        results = [await outcome(tool_host, faulty, "touch", timeout_s=5.0) for _ in range(2)]
        elapsed_s = loop.time() - begun
    finally:
        await tool_host.aclose()

    assert [type(result) for result in results] == [ToolFailed] * 2, results
    assert all(result.reason == "MCP server 'faulty' did not finish its start-up within 2s" for result in results)
    assert elapsed_s < 2 * 2.0 + 1.0  # at the limit, not after the hung process was stopped
    assert len(set(started(faulty.workdir))) == 2


async def test_a_hung_start_is_stopped_at_its_limit_when_no_caller_waits(faulty: Any) -> None:
    faulty.change(startup="hang")
    tool_host = McpToolHost({"faulty": faulty.config}, start_timeout_s=1.0)
    try:
        assert_ended(await outcome(tool_host, faulty, "touch", timeout_s=0.3), ToolFailed, "server_unavailable")
        deadline = asyncio.get_running_loop().time() + 15.0
        while not (pids := started(faulty.workdir)):
            assert asyncio.get_running_loop().time() < deadline, "the server never started"
            await asyncio.sleep(0.1)
        (pid,) = pids
        while alive(pid):
            assert asyncio.get_running_loop().time() < deadline, "the hung server outlived its start-up limit"
            await asyncio.sleep(0.1)
    finally:
        await tool_host.aclose()


async def test_concurrent_calls_while_the_start_hangs(host: McpToolHost, faulty: Any, mcp_servers: Any) -> None:
    faulty.change(startup="hang")
    other = healthy(mcp_servers)

    stuck = [asyncio.create_task(outcome(host, faulty, "touch", timeout_s=1.5)) for _ in range(5)]
    served = [await call(host, other, "echo", {"name": str(index)}) for index in range(3)]
    results = await asyncio.gather(*stuck)

    assert all(isinstance(result, ToolFailed) for result in results), results
    assert {result.reason_code for result in results} == {"server_unavailable"}
    assert [result["structured"]["arguments"]["name"] for result in served] == ["0", "1", "2"]


async def test_server_that_exits_during_the_handshake(host: McpToolHost, faulty: Any) -> None:
    faulty.change(startup="exit")

    result = await outcome(host, faulty, "touch")

    assert_ended(result, ToolFailed, "server_unavailable")


async def test_server_that_hangs_after_the_handshake(faulty: Any) -> None:
    faulty.change(listing="hang")
    tool_host = McpToolHost({"faulty": faulty.config}, start_timeout_s=3.0)
    try:
        assert_ended(await outcome(tool_host, faulty, "touch", timeout_s=10.0), ToolFailed, "server_unavailable")
        assert_ended(await outcome(tool_host, faulty, "touch", timeout_s=0.3), ToolFailed, "server_unavailable")
    finally:
        await tool_host.aclose()
    assert not (faulty.workdir / "touch.marker").exists()


async def test_a_cancelled_caller_gets_its_cancellation_and_nothing_else_breaks(
    host: McpToolHost, faulty: Any, mcp_servers: Any
) -> None:
    task = asyncio.create_task(call(host, faulty, "hang", {}))
    await asyncio.sleep(1.0)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await call(host, healthy(mcp_servers), "echo", {}))["content"]
    assert (await call(host, faulty, "touch", {"name": "next.marker"}))["content"]


async def test_aclose_during_calls_ends_them_and_raises_nothing(faulty: Any, mcp_servers: Any) -> None:
    tool_host = McpToolHost({"faulty": faulty.config, "healthy": healthy(mcp_servers).config})
    await call(tool_host, faulty, "touch", {"name": "warm.marker"})
    pending = asyncio.create_task(outcome(tool_host, faulty, "hang"))
    cancelled = asyncio.create_task(outcome(tool_host, faulty, "hang"))
    await asyncio.sleep(1.0)
    cancelled.cancel()

    await tool_host.aclose()
    await tool_host.aclose()  # twice: still nothing raised

    assert_ended(await pending, ToolOutcomeUnknown, "connection_lost")
    assert isinstance(await cancelled, asyncio.CancelledError)


async def test_a_session_task_cancelled_under_a_call_is_not_a_cancelled_call(host: McpToolHost, faulty: Any) -> None:
    """A stray cancellation from the session's own task reaches the caller as an outcome, not CancelledError."""
    await call(host, faulty, "touch", {"name": "warm.marker"})
    pending = asyncio.create_task(outcome(host, faulty, "hang"))
    await asyncio.sleep(1.0)
    for task in asyncio.all_tasks():
        if task.get_name() == "mcp-session-faulty":
            task.cancel()

    assert_ended(await pending, ToolOutcomeUnknown, "connection_lost")
    assert (await call(host, faulty, "touch", {"name": "restarted.marker"}))["content"]


async def test_a_stray_cancellation_before_sending_is_a_failure(
    host: McpToolHost, faulty: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def cancelled(self: Connection) -> Any:
        raise asyncio.CancelledError

    monkeypatch.setattr(Connection, "client", cancelled)

    assert_ended(await outcome(host, faulty, "touch"), ToolFailed, "server_unavailable")


async def test_a_stray_cancellation_after_sending_is_an_unknown_outcome(
    host: McpToolHost, faulty: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def cancelled(self: ClientSession, *args: Any, **kwargs: Any) -> Any:
        raise asyncio.CancelledError

    monkeypatch.setattr(ClientSession, "call_tool", cancelled)

    assert_ended(await outcome(host, faulty, "touch"), ToolOutcomeUnknown, "connection_lost")


async def test_a_connection_lost_before_sending_sends_nothing(
    host: McpToolHost, faulty: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = Connection.tools

    async def lost_after_listing(self: Connection, *args: Any) -> Any:
        tools = await listed(self, *args)
        self.lost = True
        return tools

    monkeypatch.setattr(Connection, "tools", lost_after_listing)

    assert_ended(await outcome(host, faulty, "touch"), ToolFailed, "server_unavailable")
    assert not (faulty.workdir / "touch.marker").exists()
