"""Tool descriptors as MCP tools: schemas, annotations and descriptions a client can use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_types import Tool, ToolAnnotations

from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import SideEffectClass

__all__ = ["Target", "hints", "input_schema", "is_mcp", "mcp_tool", "output_schema", "target_of"]

_DEFS = ("$defs", "definitions")
_DROPPED = ("$schema", "$id")


@dataclass(frozen=True)
class Target:
    """What one MCP tool name calls: an effectgate tool's operation at the listed version."""

    tool: str
    version: str
    operation: str
    spec: OperationSpec
    adapter: str

    @property
    def read_only(self) -> bool:
        """Whether the operation has no effect (a re-run is harmless)."""
        return self.spec.side_effect_class is SideEffectClass.READ_ONLY


def is_mcp(adapter: str) -> bool:
    """Whether results come from an MCP upstream (``mcp:<server>``): ``{"structured", "content"}``."""
    return adapter.startswith("mcp:")


def target_of(descriptor: ToolDescriptor, operation: str) -> Target:
    """The :class:`Target` of one operation of ``descriptor``."""
    spec = descriptor.operations[operation]
    return Target(descriptor.name, descriptor.version, operation, spec, descriptor.adapter)


def mcp_tool(name: str, target: Target, tool_description: str = "") -> Tool:
    """The MCP tool a client lists for ``target`` under ``name``."""
    spec = target.spec
    return Tool(
        name=name,
        title=f"{target.tool} {target.operation}",
        description=_description(target, tool_description),
        input_schema=input_schema(spec.input_schema),
        output_schema=output_schema(spec.output_schema, is_mcp(target.adapter)),
        annotations=hints(target),
    )


def _description(target: Target, tool_description: str) -> str:
    text = target.spec.description or tool_description or f"{target.operation} of {target.tool}"
    effect = target.spec.side_effect_class.value.replace("_", " ").lower()
    return f"{text}\n\n[effectgate: {effect}, {target.spec.risk_tier.value} risk; a call may need a person's approval]"


def input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as an MCP ``inputSchema`` (module docstring)."""
    shaped = {key: value for key, value in schema.items() if key not in _DROPPED}
    shaped["type"] = "object"
    return shaped


def output_schema(schema: dict[str, Any], mcp_envelope: bool) -> dict[str, Any] | None:
    """The MCP ``outputSchema`` of an operation, or ``None`` when its results are not always objects."""
    if mcp_envelope:
        structured = (schema.get("properties") or {}).get("structured")
        if not isinstance(structured, dict):
            return None
        schema = {**structured, **{key: schema[key] for key in _DEFS if key in schema}}
    if schema.get("type") != "object":
        return None
    return {key: value for key, value in schema.items() if key not in _DROPPED}


def hints(target: Target) -> ToolAnnotations:
    """Hints from the side-effect class (module docstring)."""
    effect = target.spec.side_effect_class
    read_only = effect is SideEffectClass.READ_ONLY
    destructive = effect.rank > SideEffectClass.REVERSIBLE_WRITE.rank
    return ToolAnnotations(
        title=f"{target.tool} {target.operation}",
        read_only_hint=read_only,
        destructive_hint=None if read_only else destructive,
        idempotent_hint=True if read_only else None,
        open_world_hint=target.spec.open_world,
    )
