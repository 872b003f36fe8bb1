"""CLI renderings treat bus text as inert: no Rich markup, no terminal control codes, nothing cut."""

from __future__ import annotations

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


def test_credentials_are_redacted_from_messages() -> None:
    assert _redact("cannot reach nats://cli:Sup3rSecret@host:4222 now") == "cannot reach nats://***@host:4222 now"


def test_a_sealed_secret_is_shown_as_a_label_never_its_ciphertext() -> None:
    ciphertext = "Q0lQSEVSVEVYVA" * 6 + "=="
    sealed = {"$sealed": ciphertext}
    shown = _render(approvals_table([_pending({"path": "a.txt", "content": sealed, "nested": {"token": sealed}})]))
    flat = shown.replace("\n", "").replace("│", "").replace(" ", "")
    assert flat.count("«sealedsecret»") == 2 and ciphertext[:12] not in flat
    payload = '{"type": "tool.requested", "operation": "write", "arguments": {"content": {"$sealed": "%s"}}}'
    trail = _render(
        trail_table(
            "r1",
            [{"sequence": 1, "event_type": "t", "subject": "s", "payload": payload % ciphertext, "hash": "h" * 64}],
        )
    )
    assert "«sealed secret»" in trail and ciphertext[:12] not in trail
