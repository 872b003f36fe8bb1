"""CLI renderings treat bus text as inert: no Rich markup, no terminal control codes, nothing cut."""

from __future__ import annotations

import json
from io import StringIO

from rich.console import Console

from toolgate.cli.render import approvals_table, trail_table
from toolgate.shared.connections import redact as _redact

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


def test_audit_trail_shows_that_the_policy_hid_a_tool() -> None:
    """The agent was told ``unknown_tool``; the operator reads that the policy hid it."""
    decision = {
        "verdict": "deny",
        "reason_code": "unknown_tool",
        "reason": "no tool",
        "hidden_reason_code": "no_permit",
    }
    record = {"sequence": 1, "event_type": "decision.made", "subject": "tg.decision.a.r", "hash": "sha256:00"}
    shown = _render(trail_table("r", [{**record, "payload": json.dumps(decision)}]))
    assert "hidden_reason_code=no_permit" in shown and "reason_code=unknown_tool" in shown


def test_credentials_are_redacted_from_messages() -> None:
    assert _redact("cannot reach nats://cli:Sup3rSecret@host:4222 now") == "cannot reach nats://***@host:4222 now"
