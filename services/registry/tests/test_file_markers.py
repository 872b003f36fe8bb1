"""The registry publishes a file marker only where the executor reads it (an MCP listing's declared arguments)."""

from __future__ import annotations

import msgspec
import pytest

from effectgate.contracts.tools.file_references import FILE_MARKER
from effectgate.registry.domain import parse_descriptor
from effectgate.registry.errors import PublishRefused
from effectgate.shared.mcp.mapping import McpToolInfo, descriptor_from_mcp
from effectgate.shared.mcp.servers import McpServerConfig, Override

ADD = McpToolInfo(
    name="git_add",
    description="stage files",
    input_schema={
        "type": "object",
        "properties": {"repo_path": {"type": "string"}, "files": {"type": "array", "items": {"type": "string"}}},
        "required": ["repo_path", "files"],
    },
)


def _config(**fields: object) -> McpServerConfig:
    return McpServerConfig(name="git", command="/bin/true", pinned_arguments={"repo_path": "/r"}, **fields)  # type: ignore[arg-type]


def test_the_imported_descriptor_carries_the_marker_through_the_registrys_checks() -> None:
    config = _config(overrides={"git_add": Override(file_arguments=("files",))})

    descriptor = parse_descriptor(msgspec.json.encode(descriptor_from_mcp(config, "1.0.0", [ADD])))

    assert descriptor.operations["git_add"].input_schema["properties"]["files"][FILE_MARKER] is True


def test_the_registry_refuses_a_file_marker_where_nothing_would_be_bound() -> None:
    listed = descriptor_from_mcp(_config(), "1.0.0", [ADD])
    spec = listed.operations["git_add"]
    misplaced = {**spec.input_schema, "$defs": {"p": {"type": "string", FILE_MARKER: True}}}
    hostile = msgspec.structs.replace(
        listed, operations={"git_add": msgspec.structs.replace(spec, input_schema=misplaced)}
    )

    with pytest.raises(PublishRefused) as refused:
        parse_descriptor(msgspec.json.encode(hostile))

    assert refused.value.reason_code == "schema_invalid" and "/$defs/p/x-effectgate-file" in refused.value.reason
