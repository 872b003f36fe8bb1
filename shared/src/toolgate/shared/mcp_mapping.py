"""Turn an MCP server's tool listing into one tool descriptor (pure, no I/O).

The descriptor of server ``<s>`` is named ``mcp_<s>``, reached by the executor through
adapter ``mcp:<s>``, with one operation per MCP tool.

Side-effect class and risk tier come from the tool annotations, with the defaults of the
MCP specification applied to missing fields (``readOnlyHint=false``,
``destructiveHint=true``, ``idempotentHint=false``, ``openWorldHint=true``; schema
``ToolAnnotations``, revision 2025-11-25):

=========  ===========  ==========  ======================  =======
readOnly   destructive  openWorld   side-effect class       tier
=========  ===========  ==========  ======================  =======
true       any          false       READ_ONLY               trivial
true       any          true        READ_ONLY               low
false      false        any         REVERSIBLE_WRITE        medium
false      true         any         IRREVERSIBLE_WRITE      high
=========  ===========  ==========  ======================  =======

No annotations at all is the last row. Annotations are hints from a server that may be
untrusted, so the configuration may only make a class or tier stricter, never looser.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from toolgate.shared.descriptors import SEMVER, OperationSpec, RateLimit, ToolDescriptor
from toolgate.shared.mcp_config import McpServerConfig, Override
from toolgate.shared.vocabulary import RiskTier, SideEffectClass

__all__ = [
    "DRAFT_2020_12",
    "McpToolInfo",
    "classify",
    "coerce_semver",
    "descriptor_from_mcp",
    "input_schema",
    "output_schema",
]

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect MCP uses by default (SEP-1613)."""

_VERSION = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+.*)?$")
_DEFS = ("$defs", "definitions")


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


def descriptor_from_mcp(config: McpServerConfig, server_version: str, tools: list[McpToolInfo]) -> ToolDescriptor:
    """Build the tool descriptor ``mcp_<server>`` from a server's tool listing.

    Args:
        config: the server's configuration (pins and overrides).
        server_version: the version the server reported, coerced with :func:`coerce_semver`.
        tools: the listed tools; each becomes one operation.

    Returns:
        The descriptor, timeout 30 s, rate limit 30 calls per 60 s.

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
        operations={tool.name: _operation(config, tool) for tool in tools},
        timeout_s=30.0,
        rate_limit=RateLimit(calls=30, period_s=60.0),
        description=f"Tools of the MCP server {config.name!r}",
    )


def _operation(config: McpServerConfig, tool: McpToolInfo) -> OperationSpec:
    effect, tier = classify(tool.annotations)
    override = config.overrides.get(tool.name)
    if override is not None:
        effect, tier = _apply(override, effect, tier, f"servers.{config.name}.overrides.{tool.name}")
    return OperationSpec(
        input_schema=input_schema(tool.input_schema, config.pinned_arguments),
        output_schema=output_schema(tool.output_schema),
        side_effect_class=effect,
        risk_tier=tier,
        description=tool.description,
    )


def classify(annotations: dict[str, bool | None] | None) -> tuple[SideEffectClass, RiskTier]:
    """Map MCP tool annotations to a side-effect class and risk tier (table in the module doc).

    Missing or ``None`` fields take the specification's defaults.
    """
    hints = annotations or {}
    read_only = _hint(hints, "readOnlyHint", False)
    if read_only:
        open_world = _hint(hints, "openWorldHint", True)
        return SideEffectClass.READ_ONLY, RiskTier.LOW if open_world else RiskTier.TRIVIAL
    if _hint(hints, "destructiveHint", True):
        return SideEffectClass.IRREVERSIBLE_WRITE, RiskTier.HIGH
    return SideEffectClass.REVERSIBLE_WRITE, RiskTier.MEDIUM


def _hint(hints: dict[str, bool | None], key: str, default: bool) -> bool:
    value = hints.get(key)
    return default if value is None else bool(value)


def _apply(override: Override, effect: SideEffectClass, tier: RiskTier, where: str) -> tuple[SideEffectClass, RiskTier]:
    if override.side_effect_class is not None:
        if override.side_effect_class.rank < effect.rank:
            raise ValueError(f"{where}.side_effect_class: {override.side_effect_class} is looser than {effect}")
        effect = override.side_effect_class
    if override.risk_tier is not None:
        if override.risk_tier.rank < tier.rank:
            raise ValueError(f"{where}.risk_tier: {override.risk_tier} is looser than {tier}")
        tier = override.risk_tier
    return effect, tier


def input_schema(schema: dict[str, Any], pinned: dict[str, Any]) -> dict[str, Any]:
    """Return the operation's input schema: ``$schema`` 2020-12 if absent, pins as ``const``.

    Every pinned argument becomes ``{"const": value}`` in ``properties`` and is listed in
    ``required``; the input ``schema`` is not modified.
    """
    result = {"$schema": DRAFT_2020_12, **schema}
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
