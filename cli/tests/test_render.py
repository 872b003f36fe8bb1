"""CLI renderings treat bus text as inert: no Rich markup, no terminal control codes, nothing cut."""

from __future__ import annotations

from io import StringIO

import msgspec
from rich.console import Console

from toolgate.cli.render import approvals_table, tools_table, trail_table
from toolgate.shared.connections import redact as _redact
from toolgate.shared.descriptors import OperationSpec, RateLimit, ToolDescriptor
from toolgate.shared.vocabulary import RiskTier, SideEffectClass

HOSTILE = "[/][conceal]hidden[/conceal]\x1b[8mx"


def _render(table: object) -> str:
    out = StringIO()
    Console(file=out, width=400, force_terminal=True, color_system="standard").print(table)
    return out.getvalue()


def _pending(arguments: dict[str, object]) -> dict[str, object]:
    request = {"tool": "file_system", "version": "1.0.0", "operation": "write", "arguments": arguments}
    return {
        "approval_id": "ap-1",
        "request_id": HOSTILE,
        "principal": "demo-agent",
        "request": request,
        "approver_role": "operator",
        "expires_at": "2026-11-29T12:00:00Z",
        "request_hash": "sha256:" + "a" * 64,
    }


def test_approvals_show_hostile_text_verbatim_and_arguments_in_full() -> None:
    long_content = "x" * 500 + "TAIL"
    shown = _render(approvals_table([_pending({"path": HOSTILE, "content": long_content})]))
    assert "[/][conceal]hidden[/conceal]" in shown
    assert "\x1b[8m" not in shown and "\\x1b[8m" in shown
    assert "TAIL" in shown.replace("\n", "").replace("│", "").replace(" ", "")


def test_audit_trail_with_hostile_type_renders() -> None:
    record = {"sequence": 1, "event_type": "[/bold]x", "subject": "tg.req.a", "payload": "{", "hash": "sha256:00"}
    assert "[/bold]x" in _render(trail_table(HOSTILE, [record]))


def test_credentials_are_redacted_from_messages() -> None:
    assert _redact("cannot reach nats://cli:Sup3rSecret@host:4222 now") == "cannot reach nats://***@host:4222 now"


def test_the_tools_table_shows_the_budget_each_operation_uses() -> None:
    spec = OperationSpec(
        input_schema={}, output_schema={}, side_effect_class=SideEffectClass.READ_ONLY, risk_tier=RiskTier.LOW
    )
    own = msgspec.structs.replace(spec, rate_limit=RateLimit(calls=2, period_s=10.0))
    tool = ToolDescriptor(name="t", version="1.0.0", adapter="x", operations={"shared": spec, "limited": own})
    rows = {line.split("│")[3].strip(): line for line in _render(tools_table([tool])).splitlines() if "│" in line}
    assert "60/60s" in rows["shared"] and "(own)" not in rows["shared"]
    assert "2/10s (own)" in rows["limited"]
