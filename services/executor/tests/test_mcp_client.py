import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.devstack.timing import scaled
from effectgate.executor.adapters.mcp.client import McpToolHost
from effectgate.executor.errors import ToolFailed, ToolRefused, ToolTimeout
from effectgate.registry.adapters.mcp_import import import_mcp_server
from effectgate.shared.mcp.loading import resolve_command
from effectgate.shared.mcp.servers import McpServerConfig

pytestmark = pytest.mark.timing  # waits on the MCP server processes it starts (limits: scaled)

TEST_SERVER = """
import asyncio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.utilities.types import Image

server = MCPServer("testing")

@server.tool()
async def sleep(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "awake"

@server.tool()
def picture() -> Image:
    return Image(data=b"binary-image-bytes", format="png")

server.run("stdio")
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("repo")
    git = ["git", "-C", str(path)]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run([*git, "config", "user.name", "Tester"], check=True)
    subprocess.run([*git, "config", "user.email", "tester@example.invalid"], check=True)
    subprocess.run([*git, "config", "commit.gpgsign", "false"], check=True)
    for name, message in (("alpha.txt", "add alpha file"), ("beta.txt", "add beta file")):
        (path / name).write_text(name + "\n")
        subprocess.run([*git, "add", name], check=True)
        subprocess.run([*git, "commit", "-q", "-m", message], check=True)
    return path


@pytest.fixture(scope="module")
def configs(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, McpServerConfig]:
    script = tmp_path_factory.mktemp("server") / "testing_server.py"
    script.write_text(TEST_SERVER)
    return {
        "time": McpServerConfig(
            name="time",
            command=resolve_command("mcp-server-time"),
            args=["--local-timezone", "UTC"],
            trust_hints=True,
        ),
        "git": McpServerConfig(
            name="git",
            command=resolve_command("mcp-server-git"),
            args=["--repository", str(repo)],
            pinned_arguments={"repo_path": str(repo)},
            trust_hints=True,
        ),
        "testing": McpServerConfig(name="testing", command=sys.executable, args=[str(script)]),
    }


@pytest.fixture(scope="module")
async def host(configs: dict[str, McpServerConfig]) -> AsyncIterator[McpToolHost]:
    tool_host = McpToolHost(configs)
    yield tool_host
    await tool_host.aclose()


@pytest.fixture(scope="module")
async def registered(configs: dict[str, McpServerConfig]) -> dict[str, ToolDescriptor]:
    """What the registry publishes for each server: the operations the calls run under (imported together)."""
    imported = await asyncio.gather(*(import_mcp_server(config) for config in configs.values()))
    return dict(zip(configs, imported, strict=True))


@pytest.fixture(scope="module")
def spec(registered: dict[str, ToolDescriptor]) -> Any:
    """``spec(server, tool)``: the registered operation of ``tool``."""
    return lambda server, tool: registered[server].operations[tool]


async def call(host: McpToolHost, spec: Any, server: str, tool: str, arguments: dict[str, Any], **kw: Any) -> Any:
    expected = kw.get("expected") or spec(server, tool)
    return await host.call(server, tool, arguments, kw.get("timeout_s", 30.0), expected)


def server_pids(fragment: str) -> set[int]:
    """Live (non-zombie) children of this process whose command line contains ``fragment``."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == os.getpid() and state != "Z" and fragment in cmdline:
            pids.add(int(entry.name))
    return pids


async def wait_until(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + scaled(timeout_s)
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def test_current_time_matches_the_descriptor_output_schema(host: McpToolHost, spec: Any) -> None:
    operation: OperationSpec = spec("time", "get_current_time")

    result = await call(host, spec, "time", "get_current_time", {"timezone": "UTC"})

    jsonschema_rs.validator_for(operation.input_schema).validate({"timezone": "UTC"})
    jsonschema_rs.validator_for(operation.output_schema).validate(result)
    assert result["structured"]["timezone"] == "UTC"
    assert result["structured"]["datetime"].endswith("+00:00")
    assert result["content"][0]["type"] == "text" and "datetime" in result["content"][0]["text"]


async def test_convert_time_matches_an_output_schema_with_refs(host: McpToolHost, spec: Any) -> None:
    validator = jsonschema_rs.validator_for(spec("time", "convert_time").output_schema)
    arguments = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}

    result = await call(host, spec, "time", "convert_time", arguments)

    validator.validate(result)
    assert result["structured"]["target"]["datetime"].startswith(result["structured"]["source"]["datetime"][:10])
    broken = {**result, "structured": {**result["structured"], "source": {"timezone": "UTC"}}}
    assert not validator.is_valid(broken)


async def test_git_log_returns_the_commit_messages(host: McpToolHost, spec: Any, repo: Path) -> None:
    result = await call(host, spec, "git", "git_log", {"repo_path": str(repo), "max_count": 10})

    text = "\n".join(item["text"] for item in result["content"])
    assert "add alpha file" in text and "add beta file" in text
    assert result["structured"] is None
    assert all(set(item) == {"type", "text"} for item in result["content"])


async def test_pinned_repo_path_overrides_a_hostile_one(
    host: McpToolHost, spec: Any, configs: dict[str, McpServerConfig]
) -> None:
    result = await call(host, spec, "git", "git_log", {"repo_path": "/etc", "max_count": 10})
    assert "add beta file" in result["content"][0]["text"]

    git = configs["git"]
    unpinned_config = McpServerConfig(name="git", command=git.command, args=git.args, trust_hints=True)
    unpinned = McpToolHost({"git": unpinned_config})
    try:
        expected = (await import_mcp_server(unpinned_config)).operations["git_log"]
        with pytest.raises(ToolFailed) as refused:
            await unpinned.call("git", "git_log", {"repo_path": "/etc"}, 30.0, expected)
        assert refused.value.reason_code == "tool_error"
        assert "outside the allowed repository" in refused.value.reason
    finally:
        await unpinned.aclose()


async def test_invalid_argument_is_a_tool_failure(host: McpToolHost, spec: Any) -> None:
    with pytest.raises(ToolFailed) as failed:
        await call(host, spec, "time", "get_current_time", {"timezone": 5})
    assert failed.value.reason_code == "tool_error"
    assert "timezone" in failed.value.reason

    with pytest.raises(ToolFailed) as failed:
        await call(host, spec, "time", "get_current_time", {"timezone": "Mars/Olympus_Mons"})
    assert failed.value.reason_code == "tool_error"


async def test_a_tool_the_server_does_not_list_is_refused_before_sending(host: McpToolHost, spec: Any) -> None:
    with pytest.raises(ToolRefused) as refused:
        await call(host, spec, "time", "no_such_tool", {}, expected=spec("time", "get_current_time"))
    assert refused.value.reason_code == "tool_definition_changed"
    assert "absent" in refused.value.reason


async def test_unknown_server_is_refused(host: McpToolHost, spec: Any) -> None:
    with pytest.raises(ToolRefused) as refused:
        await host.call("nowhere", "x", {}, 5.0, spec("time", "get_current_time"))
    assert refused.value.reason_code == "unknown_server"


async def test_timeout_then_the_session_still_serves(host: McpToolHost, spec: Any) -> None:
    await call(host, spec, "testing", "sleep", {"seconds": 0.01})  # started: the limit below is the call's own
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(ToolTimeout) as timed_out:
        await call(host, spec, "testing", "sleep", {"seconds": 30}, timeout_s=1.0)
    assert loop.time() - started < 5.0
    assert timed_out.value.reason_code == "tool_timeout"

    result = await call(host, spec, "testing", "sleep", {"seconds": 0.01})
    assert result["content"] == [{"type": "text", "text": "awake"}]


async def test_binary_content_is_dropped(host: McpToolHost, spec: Any) -> None:
    result = await call(host, spec, "testing", "picture", {})
    assert result["content"] == [{"type": "image", "mimeType": "image/png"}]


async def test_concurrent_calls_from_five_tasks(host: McpToolHost, spec: Any, repo: Path) -> None:
    async def one(index: int) -> dict[str, Any]:
        if index % 2:
            return await call(host, spec, "time", "get_current_time", {"timezone": "UTC"})
        return await call(host, spec, "git", "git_log", {"repo_path": str(repo)})

    results = await asyncio.gather(*(asyncio.create_task(one(i)) for i in range(5)))

    assert [r["structured"] is not None for r in results] == [False, True, False, True, False]
    assert all("add alpha file" in r["content"][0]["text"] for r in results[::2])


async def test_a_dead_session_is_restarted_by_the_next_call(configs: dict[str, McpServerConfig], spec: Any) -> None:
    others = server_pids("mcp-server-time")
    tool_host = McpToolHost({"time": configs["time"]})
    try:
        await call(tool_host, spec, "time", "get_current_time", {"timezone": "UTC"})
        (old,) = server_pids("mcp-server-time") - others
        os.kill(old, signal.SIGKILL)
        await wait_until(lambda: old not in server_pids("mcp-server-time"))
        await asyncio.sleep(0.2)

        result = await call(tool_host, spec, "time", "get_current_time", {"timezone": "UTC"})

        assert result["structured"]["timezone"] == "UTC"
        (new,) = server_pids("mcp-server-time") - others
        assert new != old
    finally:
        await tool_host.aclose()


async def test_aclose_terminates_the_server_processes(configs: dict[str, McpServerConfig]) -> None:
    before = server_pids("mcp-server-")
    tool_host = McpToolHost({"time": configs["time"], "git": configs["git"]})
    await tool_host.start()
    started = server_pids("mcp-server-") - before
    assert len(started) == 2

    await tool_host.aclose()

    await wait_until(lambda: not (server_pids("mcp-server-") & started), timeout_s=10.0)


async def test_unstartable_server_is_a_tool_failure(spec: Any) -> None:
    tool_host = McpToolHost({"gone": McpServerConfig(name="gone", command="/nonexistent/mcp-server")})
    try:
        with pytest.raises(ToolFailed) as failed:
            await tool_host.call("gone", "anything", {}, 10.0, spec("time", "get_current_time"))
        assert failed.value.reason_code == "server_unavailable"
    finally:
        await tool_host.aclose()
