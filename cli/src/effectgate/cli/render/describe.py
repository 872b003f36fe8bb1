"""``effectgate tools describe``: one tool's descriptor, readable at 80 columns.

The tool's head (version, adapter, timeout, shared rate limit, state when the registry reports
one), then one block per operation: side-effect class, risk tier, limits (rate, cost, amount and
destination pointers) and its input and output JSON Schemas, indented and folded to the width
of the terminal.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text

from effectgate.cli.render.views import plain_text
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor, rate_of

__all__ = ["STATE_KEYS", "describe_tool"]

STATE_KEYS = ("state", "state_reason")
"""Keys a registry reply (or its descriptor) may carry about the tool's state (ready, unavailable, …)."""


def _line(label: str, value: Any) -> Text:
    return Text.assemble((f"{label}: ", "bold"), plain_text(value))


def _schema(label: str, schema: dict[str, Any]) -> RenderableType:
    text = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False)
    return Group(Text(f"{label}:", style="bold"), Padding(plain_text(text), (0, 0, 0, 2)))


def _limits(tool: ToolDescriptor, name: str, spec: OperationSpec) -> list[Text]:
    bucket, rate = rate_of(tool, name)
    shared = "its own" if bucket != tool.name else "shared by the tool's operations"
    lines = [_line("rate limit", f"{rate.calls} calls per {rate.period_s:g} s per principal ({shared})")]
    for label, value in (("cost", spec.cost), ("amount at", spec.amount), ("destination at", spec.destination)):
        if value is not None:
            lines.append(_line(label, value))
    return lines


def _operation(tool: ToolDescriptor, name: str, spec: OperationSpec) -> RenderableType:
    effect = spec.side_effect_class.value + (" (open world)" if spec.open_world else "")
    body: list[RenderableType] = [
        *([plain_text(spec.description)] if spec.description else []),
        _line("side-effect class", effect),
        _line("risk tier", spec.risk_tier.value),
        *_limits(tool, name, spec),
        _schema("input schema", spec.input_schema),
        _schema("output schema", spec.output_schema),
    ]
    head = Text.assemble(("operation ", "bold"), plain_text(name, "bold cyan"))
    return Group(Text(""), head, Padding(Group(*body), (0, 0, 0, 2)))


def _head(tool: ToolDescriptor, state: dict[str, Any]) -> list[RenderableType]:
    title = Text.assemble(plain_text(tool.name, "bold"), " ", plain_text(tool.version))
    lines: list[RenderableType] = [title, *([plain_text(tool.description)] if tool.description else [])]
    lines += [_line("adapter", tool.adapter), _line("timeout", f"{tool.timeout_s:g} s")]
    if state.get("state"):
        why = f" ({state['state_reason']})" if state.get("state_reason") else ""
        lines.append(_line("state", f"{state['state']}{why}"))
    return lines


def describe_tool(tool: ToolDescriptor, state: dict[str, Any] | None = None) -> Group:
    """The descriptor as text blocks; ``state`` holds :data:`STATE_KEYS` when the registry reported them."""
    blocks = _head(tool, state or {})
    blocks += [_operation(tool, name, spec) for name, spec in sorted(tool.operations.items())]
    return Group(*blocks)
