"""Publishing refuses schemas that refer outside themselves, on real NATS KV, and fetches nothing.

A counting HTTP server on 127.0.0.1 (``remote``) stands for the remote host: every case
asserts it was never asked for anything.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from nats.js import JetStreamContext

from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.registry.adapters.mcp_import import import_mcp_server
from effectgate.registry.app import _seed, _servers
from effectgate.registry.domain import parse_descriptor
from effectgate.registry.errors import PublishRefused
from effectgate.registry.importing import McpImports
from effectgate.registry.service import Registry
from effectgate.registry.settings import RegistrySettings
from effectgate.shared.mcp.servers import McpServerConfig
from effectgate.shared.stores.tools_kv import ToolsBucket

PLAIN = {"type": "object"}


def _descriptor(name: str, input_schema: dict[str, Any], output_schema: dict[str, Any] = PLAIN) -> ToolDescriptor:
    spec = OperationSpec(
        input_schema=input_schema,
        output_schema=output_schema,
        side_effect_class=SideEffectClass.READ_ONLY,
        risk_tier=RiskTier.LOW,
    )
    return ToolDescriptor(name=name, version="1.0.0", adapter="file_system", operations={"lookup": spec})


def _remote_schemas(base: str) -> dict[str, tuple[dict[str, Any], str]]:
    """Case -> (input schema, JSON Pointer of the offending keyword)."""
    remote = f"{base}/remote.json"
    return {
        "top-level": ({"$ref": remote}, "/$ref"),
        "in-properties": ({"properties": {"q": {"$ref": remote}}}, "/properties/q/$ref"),
        "in-items": ({"properties": {"q": {"items": {"$ref": remote}}}}, "/properties/q/items/$ref"),
        "in-allOf": ({"allOf": [{"type": "object"}, {"$ref": remote}]}, "/allOf/1/$ref"),
        "in-defs": ({"$defs": {"d": {"$ref": remote}}, "$ref": "#/$defs/d"}, "/$defs/d/$ref"),
        "dynamicRef": ({"$dynamicRef": remote + "#node"}, "/$dynamicRef"),
        "relative": ({"properties": {"q": {"$ref": "other.json#/x"}}}, "/properties/q/$ref"),
    }


CASES = ["top-level", "in-properties", "in-items", "in-allOf", "in-defs", "dynamicRef", "relative"]


@pytest.fixture
async def registry(js: JetStreamContext) -> Registry:
    async def announce(subject: str, event: Any) -> object:
        return None

    return Registry(bucket=await ToolsBucket.open(js), publish_event=announce, clock=lambda: datetime.now(UTC))


@pytest.mark.parametrize("kind", ["input_schema", "output_schema"])
@pytest.mark.parametrize("case", CASES)
async def test_publish_refuses_a_remote_reference_naming_operation_schema_and_pointer(
    registry: Registry, remote: Any, ns: str, case: str, kind: str
) -> None:
    schema, pointer = _remote_schemas(remote.base)[case]
    schemas = {kind: schema, **({"input_schema": PLAIN} if kind == "output_schema" else {})}
    descriptor = _descriptor(ns, **schemas)

    for publish in (registry.publish, _publish_wire(registry)):
        with pytest.raises(PublishRefused) as refused:
            await publish(descriptor)
        assert refused.value.reason_code == "schema_invalid"
        assert f"operation 'lookup' {kind}: {pointer}: " in refused.value.reason, refused.value.reason

    assert (await registry.get(ns, None)).reason_code == "unknown_tool", "nothing was stored"
    assert remote.hits == []


def _publish_wire(registry: Registry) -> Callable[[ToolDescriptor], Awaitable[object]]:
    """Publish as the handler does: from the bytes of the descriptor."""

    async def publish(descriptor: ToolDescriptor) -> object:
        return await registry.publish(parse_descriptor(msgspec.json.encode(descriptor)))

    return publish


async def test_local_references_still_publish_and_validate(registry: Registry, remote: Any, ns: str) -> None:
    schema = {"$defs": {"q": {"type": "string", "minLength": 2}}, "properties": {"q": {"$ref": "#/$defs/q"}}}
    assert (await registry.publish(_descriptor(ns, schema))).reason_code == "published"
    assert remote.hits == []


SERVER = """
import asyncio, json, sys
import mcp.server.stdio
from mcp import types
from mcp.server.lowlevel import Server

async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in json.loads(sys.argv[1])])

async def main():
    server = Server("listing", on_list_tools=list_tools)
    async with mcp.server.stdio.stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

asyncio.run(main())
"""


def _server(tmp_path: Path, name: str, tools: list[dict[str, Any]]) -> McpServerConfig:
    script = tmp_path / "listing_server.py"
    script.write_text(SERVER)
    return McpServerConfig(name=name, command=sys.executable, args=[str(script), json.dumps(tools)])


def _listed_tools(base: str) -> dict[str, tuple[list[dict[str, Any]], str]]:
    """Case -> (the server's tools/list, where the refusal must point)."""
    fine = {"name": "fine", "inputSchema": {"type": "object", "$defs": {"s": {"type": "string"}}}}
    remote = f"{base}/remote.json"
    return {
        "input": (
            [fine, {"name": "fetchy", "inputSchema": {"type": "object", "properties": {"u": {"$ref": remote}}}}],
            "tool 'fetchy', inputSchema /properties/u/$ref: ",
        ),
        "output": (
            [fine, {"name": "outy", "inputSchema": {"type": "object"}, "outputSchema": {"$ref": "other.json"}}],
            "tool 'outy', outputSchema /$ref: ",
        ),
    }


@pytest.mark.parametrize("case", ["input", "output"])
async def test_mcp_import_ends_with_an_error_naming_server_tool_and_pointer(
    tmp_path: Path, remote: Any, case: str
) -> None:
    tools, where = _listed_tools(remote.base)[case]
    with pytest.raises(PublishRefused) as refused:
        await import_mcp_server(_server(tmp_path, "lister", tools), timeout_s=30.0)
    assert refused.value.reason_code == "schema_invalid"
    assert f"MCP server 'lister', {where}" in refused.value.reason, refused.value.reason
    assert remote.hits == []


async def test_registry_start_up_logs_the_refused_server_and_publishes_nothing_for_it(
    tmp_path: Path, remote: Any, caplog: pytest.LogCaptureFixture
) -> None:
    tools, _ = _listed_tools(remote.base)["input"]
    config = _server(tmp_path, "lister", tools)
    servers = tmp_path / "servers.toml"
    servers.write_text(f"[servers.lister]\ncommand = {json.dumps(config.command)}\nargs = {json.dumps(config.args)}\n")
    settings = RegistrySettings(descriptors_dir=None, mcp_servers_file=servers)

    with caplog.at_level(logging.ERROR, logger="effectgate.registry"):
        seeded = await _seed(settings, imports := McpImports(_servers(settings), 30.0, import_mcp_server))

    assert seeded == [] and not imports.missing  # refused: trying again would refuse the same listing
    assert "MCP server 'lister' not imported" in caplog.text and "/properties/u/$ref" in caplog.text
    assert remote.hits == []
