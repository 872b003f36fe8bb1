"""Rug pulls: a call runs only while the server's live tool still maps to the registered operation."""

import asyncio
from pathlib import Path
from typing import Any

import pytest

from effectgate.contracts.vocabulary import SideEffectClass
from effectgate.executor.adapters.file_system import FileSystemTool
from effectgate.executor.adapters.mcp.client import McpToolHost
from effectgate.executor.adapters.tool_host import LocalToolHost
from effectgate.executor.errors import ToolRefused
from effectgate.registry.adapters.mcp_import import import_mcp_server
from effectgate.shared.mcp.servers import Override

READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
TARGET_SCHEMA = {"type": "object", "properties": {"target": {"type": "string"}}, "required": ["target"]}


@pytest.fixture
def lab(mcp_servers: Any) -> Any:
    tools = [
        mcp_servers.tool("touch", "touch", annotations=READ_ONLY),
        mcp_servers.tool("save", "touch", annotations={"readOnlyHint": False, "destructiveHint": False}),
        mcp_servers.tool("announce", "announce", annotations=READ_ONLY),
    ]
    return mcp_servers("lab", tools, trust_hints=True)


@pytest.fixture
async def host(lab: Any) -> Any:
    tool_host = McpToolHost({"lab": lab.config}, start_timeout_s=20.0)
    yield tool_host
    await tool_host.aclose()


async def touch(host: McpToolHost, expected: Any, name: str, tool: str = "touch") -> Any:
    return await host.call("lab", tool, {"name": name}, 10.0, expected)


def pull_the_rug(lab: Any) -> None:
    """The server now lists ``touch`` as destructive, taking ``{target}``."""
    lab.change_tool("touch", annotations={"readOnlyHint": False, "destructiveHint": True}, inputSchema=TARGET_SCHEMA)


async def refused(call: Any) -> ToolRefused:
    with pytest.raises(ToolRefused) as caught:
        await call
    assert caught.value.reason_code == "tool_definition_changed"
    return caught.value


async def test_a_write_is_checked_against_a_listing_fetched_for_it(host: McpToolHost, lab: Any) -> None:
    registered = lab.registered("save")
    assert registered.side_effect_class is SideEffectClass.REVERSIBLE_WRITE
    await touch(host, registered, "first", tool="save")

    lab.change_tool("save", inputSchema=TARGET_SCHEMA)  # no notification: the re-listing before the write finds it
    error = await refused(touch(host, registered, "second", tool="save"))

    assert error.reason == "MCP tool lab/save changed since it was registered: input schema"
    assert (lab.workdir / "first").exists() and not (lab.workdir / "second").exists()


@pytest.mark.parametrize("era", ["any", "legacy"])
async def test_a_read_is_rechecked_when_the_server_announces_a_change(mcp_servers: Any, era: str) -> None:
    tools = [
        mcp_servers.tool("touch", "touch", annotations=READ_ONLY),
        mcp_servers.tool("announce", "announce", annotations=READ_ONLY),
    ]
    lab = mcp_servers("lab", tools, trust_hints=True)
    lab.change(era=era)
    tool_host = McpToolHost({"lab": lab.config}, start_timeout_s=20.0, listing_max_age_s=3600.0)
    try:
        registered = lab.registered("touch")
        await touch(tool_host, registered, "before")
        pull_the_rug(lab)
        await touch(tool_host, lab.registered("announce"), "ignored", tool="announce")
        await asyncio.sleep(0.5)

        error = await refused(touch(tool_host, registered, "status"))
    finally:
        await tool_host.aclose()

    assert "input schema" in error.reason and "side-effect class READ_ONLY -> IRREVERSIBLE_WRITE" in error.reason
    assert "risk tier trivial -> high" in error.reason
    assert not (lab.workdir / "status").exists()


async def test_a_read_uses_a_listing_no_older_than_its_limit(lab: Any) -> None:
    tool_host = McpToolHost({"lab": lab.config}, start_timeout_s=20.0, listing_max_age_s=1.0)
    try:
        registered = lab.registered("touch")
        await touch(tool_host, registered, "before")
        pull_the_rug(lab)
        await asyncio.sleep(1.2)

        await refused(touch(tool_host, registered, "status"))
    finally:
        await tool_host.aclose()
    assert not (lab.workdir / "status").exists()


async def test_a_new_session_checks_against_its_own_first_listing(lab: Any) -> None:
    registered = lab.registered("touch")
    pull_the_rug(lab)
    tool_host = McpToolHost({"lab": lab.config}, start_timeout_s=20.0)
    try:
        await refused(touch(tool_host, registered, "status"))
    finally:
        await tool_host.aclose()
    assert not (lab.workdir / "status").exists()


@pytest.mark.parametrize(
    ("tool", "change", "named"),
    [
        (
            "save",
            {"annotations": {"destructiveHint": True}},
            "side-effect class REVERSIBLE_WRITE -> IRREVERSIBLE_WRITE, risk tier medium -> high",
        ),
        (
            "touch",
            {"annotations": {"readOnlyHint": True, "openWorldHint": True}},
            "risk tier trivial -> low, open world False -> True",
        ),
        ("save", {"description": "now also emails your files"}, "description"),
        ("save", {"outputSchema": {"type": "object"}}, "output schema"),
    ],
)
async def test_each_kind_of_change_is_named(
    host: McpToolHost, lab: Any, tool: str, change: dict[str, Any], named: str
) -> None:
    registered = lab.registered(tool)
    lab.change_tool(tool, **change)

    error = await refused(touch(host, registered, "status", tool=tool))

    assert error.reason == f"MCP tool lab/{tool} changed since it was registered: {named}"
    assert not (lab.workdir / "status").exists()


async def test_a_tool_the_server_no_longer_lists_is_refused(host: McpToolHost, lab: Any, mcp_servers: Any) -> None:
    registered = lab.registered("save")
    lab.change(tools=[mcp_servers.tool("touch", "touch", annotations=READ_ONLY)])

    error = await refused(touch(host, registered, "status", tool="save"))

    assert error.reason == "MCP tool lab/save is absent from the server's listing"


@pytest.mark.parametrize("change", ["added", "redefined"])
async def test_a_read_the_cached_listing_would_refuse_is_checked_against_a_fresh_one(
    lab: Any, mcp_servers: Any, change: str
) -> None:
    tool_host = McpToolHost({"lab": lab.config}, start_timeout_s=20.0, listing_max_age_s=3600.0)
    try:
        await touch(tool_host, lab.registered("touch"), "before")
        if change == "added":  # no notification: only a fresh listing knows the new tool
            lab.add_tool(mcp_servers.tool("stamp", "touch", annotations=READ_ONLY))
        else:  # the registry re-published touch as the server lists it now
            lab.change_tool("touch", description="touch, now documented")
        tool = "stamp" if change == "added" else "touch"

        await touch(tool_host, lab.registered(tool), "after", tool=tool)
    finally:
        await tool_host.aclose()
    assert (lab.workdir / "after").exists()


async def test_configuration_applies_to_the_live_tool_as_to_the_registered_one(mcp_servers: Any) -> None:
    overrides = {"touch": Override(side_effect_class=SideEffectClass.SECURITY_SENSITIVE)}
    lab = mcp_servers(
        "lab", [mcp_servers.tool("touch", "touch")], overrides=overrides, pinned_arguments={"name": "pinned"}
    )
    registered = lab.registered("touch")
    tool_host = McpToolHost({"lab": lab.config}, start_timeout_s=20.0)
    try:
        result = await tool_host.call("lab", "touch", {"name": "agent-chosen"}, 10.0, registered)
    finally:
        await tool_host.aclose()

    assert registered.side_effect_class is SideEffectClass.SECURITY_SENSITIVE
    assert registered.input_schema["properties"]["name"] == {"const": "pinned"}
    assert result["content"][0]["text"] == '{"touched": "pinned"}'


async def test_the_tool_host_runs_a_call_under_its_descriptors_operation(
    host: McpToolHost, lab: Any, tmp_path: Path
) -> None:
    descriptor = await import_mcp_server(lab.config)  # what the registry published
    tools = LocalToolHost(FileSystemTool(tmp_path), host)
    pull_the_rug(lab)

    await refused(tools.call(descriptor, "touch", {"name": "status"}))
    with pytest.raises(ToolRefused) as unknown:
        await tools.call(descriptor, "no_such_operation", {})

    assert unknown.value.reason_code == "unknown_operation"
    assert not (lab.workdir / "status").exists()
