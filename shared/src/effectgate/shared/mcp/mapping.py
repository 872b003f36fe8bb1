"""Turn an MCP server's tool listing into one tool descriptor (pure, no I/O).

The descriptor of server ``<s>`` is named ``mcp_<s>``, reached by the executor through
adapter ``mcp:<s>``, with one operation per MCP tool. The executor maps the live listing
with the same rules (:func:`operation_from_mcp`) and refuses a call whose tool no longer
maps to the registered operation (:func:`operation_changes`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from effectgate.contracts.tools.descriptors import SEMVER, OperationSpec, ToolDescriptor
from effectgate.contracts.tools.file_references import FILE_MARKER
from effectgate.shared.mcp.hints import effect_and_tier, open_world
from effectgate.shared.mcp.servers import McpServerConfig, Override

__all__ = [
    "DRAFT_2020_12",
    "McpToolInfo",
    "coerce_semver",
    "descriptor_from_mcp",
    "input_schema",
    "operation_changes",
    "operation_from_mcp",
    "output_schema",
    "tool_from_wire",
]

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect MCP uses by default (SEP-1613)."""

_VERSION = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+.*)?$")
_DEFS = ("$defs", "definitions")
_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


class McpToolInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of an MCP ``tools/list`` result.

    Attributes:
        name: MCP tool name, becomes the operation name.
        description: the tool's description ("" when absent).
        input_schema: the tool's ``inputSchema``.
        output_schema: the tool's ``outputSchema``, ``None`` when it declares none.
        annotations: wire names (``readOnlyHint``, ``destructiveHint``,
            ``idempotentHint``, ``openWorldHint``) to their value; ``None`` when the
            server sent no annotations.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, bool | None] | None = None


class _WireTool(msgspec.Struct, kw_only=True, rename="camel"):
    """The fields of an MCP ``Tool`` (schema revision 2025-11-25) that the mapping reads."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None


def tool_from_wire(wire: Mapping[str, Any]) -> McpToolInfo:
    """Read one ``tools/list`` entry in its wire form (camelCase keys) as :class:`McpToolInfo`.

    Unknown fields (``title``, ``icons``, ``_meta`` …) and annotations other than the four
    hints are ignored.

    Raises:
        ValueError: a field the mapping reads is missing or of the wrong type.
    """
    try:
        tool = msgspec.convert(dict(wire), _WireTool)
    except msgspec.ValidationError as exc:
        raise ValueError(f"MCP tool {wire.get('name')!r}: {exc}") from exc
    hints = None
    if tool.annotations is not None:
        hints = {hint: _flag(tool.annotations.get(hint)) for hint in _HINTS}
    return McpToolInfo(
        name=tool.name,
        description=tool.description or "",
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=hints,
    )


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def descriptor_from_mcp(config: McpServerConfig, server_version: str, tools: list[McpToolInfo]) -> ToolDescriptor:
    """Build the tool descriptor ``mcp_<server>`` from a server's tool listing.

    Args:
        config: the server's configuration (pins and overrides).
        server_version: the version the server reported, coerced with :func:`coerce_semver`.
        tools: the listed tools; each becomes one operation.

    Returns:
        The descriptor, timeout 30 s, the server's ``rate_limit`` (default 30 calls per
        60 s) shared by the tools, and each tool's ``rate_limit`` override as its
        operation's own budget.

    Raises:
        ValueError: an override is looser than the annotations, or names a tool the
            server does not list; two tools share a name.
    """
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise ValueError(f"server {config.name!r} lists a tool name twice")
    unknown = sorted(set(config.overrides) - set(names))
    if unknown:
        raise ValueError(f"servers.{config.name}.overrides.{unknown[0]}: the server lists no such tool")
    return ToolDescriptor(
        name=f"mcp_{config.name}",
        version=coerce_semver(server_version),
        adapter=f"mcp:{config.name}",
        operations={tool.name: operation_from_mcp(config, tool) for tool in tools},
        timeout_s=30.0,
        rate_limit=config.rate_limit,
        description=f"Tools of the MCP server {config.name!r} (upstream version {server_version or 'not given'})",
    )


def operation_from_mcp(config: McpServerConfig, tool: McpToolInfo) -> OperationSpec:
    """Map one listed tool to the operation the registry publishes for it.

    Raises:
        ValueError: the server's hints are trusted and the tool's override is looser
            than its annotations; a ``file_arguments`` name is no argument of the tool, or pinned.
    """
    effect, tier = effect_and_tier(config, tool)
    override = config.overrides.get(tool.name) or Override()
    try:
        schema = input_schema(tool.input_schema, config.pinned_arguments, override.file_arguments)
    except ValueError as exc:
        raise ValueError(f"servers.{config.name}.overrides.{tool.name}.file_arguments: {exc}") from None
    return OperationSpec(
        input_schema=schema,
        output_schema=output_schema(tool.output_schema),
        side_effect_class=effect,
        risk_tier=tier,
        description=tool.description,
        rate_limit=override.rate_limit,
        open_world=open_world(config, tool, override),
        destination=override.destination,
        amount=override.amount,
        cost=override.cost,
    )


def operation_changes(registered: OperationSpec, live: OperationSpec) -> list[str]:
    """Name what differs between a registered operation and the one a live tool maps to.

    Returns:
        ``[]`` when they are equal; else items such as ``"input schema"``,
        ``"side-effect class READ_ONLY -> IRREVERSIBLE_WRITE"``, ``"risk tier low -> high"``,
        ``"output schema"``, ``"description"``.
    """
    changes = [name for name, field in _SCHEMAS if getattr(registered, field) != getattr(live, field)]
    if registered.side_effect_class != live.side_effect_class:
        changes.append(f"side-effect class {registered.side_effect_class} -> {live.side_effect_class}")
    if registered.risk_tier != live.risk_tier:
        changes.append(f"risk tier {registered.risk_tier} -> {live.risk_tier}")
    if registered.open_world != live.open_world:
        changes.append(f"open world {registered.open_world} -> {live.open_world}")
    if registered.description != live.description:
        changes.append("description")
    return changes


_SCHEMAS = (("input schema", "input_schema"), ("output schema", "output_schema"))


def input_schema(schema: dict[str, Any], pinned: dict[str, Any], files: tuple[str, ...] = ()) -> dict[str, Any]:
    """Return the operation's input schema: ``$schema`` 2020-12 if absent, pins as ``const``, file references marked.

    Every pinned argument becomes ``{"const": value}`` in ``properties`` and is listed in
    ``required``; every argument named in ``files`` gets ``x-effectgate-file: true``. The
    input ``schema`` is not modified.

    Raises:
        ValueError: a name in ``files`` is no property of the schema, or is pinned.
    """
    result = {"$schema": DRAFT_2020_12, **schema}
    if files:
        properties = dict(result.get("properties") or {})
        for name in files:
            if name in pinned or not isinstance(properties.get(name), dict):
                raise ValueError(f"{name!r} is not an argument of the tool that a call sets")
            properties[name] = {**properties[name], FILE_MARKER: True}
        result["properties"] = properties
    if pinned:
        properties = dict(result.get("properties") or {})
        properties.update({name: {"const": value} for name, value in pinned.items()})
        required = list(result.get("required") or [])
        required += [name for name in pinned if name not in required]
        result.update(properties=properties, required=required)
    return result


def output_schema(tool_schema: dict[str, Any] | None) -> dict[str, Any]:
    """Return the schema of the executor's MCP result ``{"structured": …, "content": [...]}``.

    ``structured`` must match the tool's ``outputSchema``; without one it is an object or
    ``null``. The tool schema's ``$defs``/``definitions`` move to the root so that its
    ``#/$defs/…`` references still resolve.
    """
    structured: dict[str, Any] = {"type": ["object", "null"]}
    definitions: dict[str, Any] = {}
    if tool_schema:
        structured = {key: value for key, value in tool_schema.items() if key != "$schema"}
        if "$id" not in structured:
            definitions = {key: structured.pop(key) for key in _DEFS if key in structured}
    return {
        "$schema": DRAFT_2020_12,
        "type": "object",
        "required": ["structured", "content"],
        "properties": {"structured": structured, "content": {"type": "array"}},
        "additionalProperties": False,
        **definitions,
    }


def coerce_semver(version: str) -> str:
    """Coerce a server-reported version to Semantic Versioning 2.0.0.

    ``2026.10.19`` stays; ``2025.04.25`` becomes ``2025.4.25``; ``v1.2`` becomes
    ``1.2.0``; build metadata (``+…``) is dropped, and so is a pre-release tag that is
    not valid SemVer (§9: no empty or zero-led numeric identifiers). Anything else becomes ``0.0.0``.
    """
    match = _VERSION.match(version.strip())
    if match is None:
        return "0.0.0"
    major, minor, patch, pre = match.groups()
    core = f"{int(major)}.{int(minor or 0)}.{int(patch or 0)}"
    candidate = f"{core}-{pre}" if pre else core
    return candidate if SEMVER.match(candidate) and not _leading_zero(pre) else core


def _leading_zero(pre: str | None) -> bool:
    """Whether a pre-release has a numeric identifier with a leading zero (SemVer 2.0.0 §9)."""
    return any(len(part) > 1 and part.isdigit() and part[0] == "0" for part in (pre or "").split("."))
