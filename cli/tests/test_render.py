"""CLI renderings treat bus text as inert: no Rich markup, no terminal control codes, nothing cut."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from io import StringIO

import msgspec
from rich.console import Console

from effectgate.cli.render.approvals import approvals_blocks
from effectgate.cli.render.views import alarm_row, alarms_table, decide_line, state_reasons, tools_table, trail_table
from effectgate.contracts.tools.descriptors import OperationSpec, RateLimit, ToolDescriptor
from effectgate.contracts.tools.tool_states import ToolState
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.shared.runtime.connections import redact as _redact

HOSTILE = "[/][conceal]hidden[/conceal]\x1b[8mx"


def _render(table: object) -> str:
    out = StringIO()
    Console(file=out, width=400, force_terminal=True, color_system="standard").print(table)
    return out.getvalue()


def _pending(arguments: dict[str, object]) -> dict[str, object]:
    request = {"principal": "demo-agent", "tool": "file_system", "version": "1.0.0", "operation": "write"}
    request |= {"arguments": arguments, "descriptor_digest": "sha256:" + "d" * 64}
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
    shown = _render(approvals_blocks([_pending({"path": HOSTILE, "content": long_content})]))
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


def test_alarms_show_kind_who_what_and_why_with_hostile_text_inert() -> None:
    event = {
        "occurred_at": "2026-11-30T10:00:00.123456Z",
        "kind": "approval_refused",
        "actor": "mallory",
        "principal": "selfie",
        "request_id": "r1",
        "approval_id": "ap-1",
        "reason_code": "self_approval",
        "detail": HOSTILE,
    }
    table = alarms_table()
    alarm_row(table, {"sequence": 42, "stream_seq": 40, "service": "approvals", "event": event})
    alarm_row(
        table,
        {
            "sequence": 43,
            "stream_seq": 41,
            "service": "registry",
            "event": {
                "occurred_at": "2026-11-30T10:00:01Z",
                "kind": "permission_violation",
                "subject": "_INBOX_ghost.1",
            },
        },
    )
    shown = _render(table)
    for text in ("42", "2026-11-30T10:00:00", "approval_refused", "approvals", "mallory", "selfie/r1/ap-1"):
        assert text in shown
    assert "self_approval" in shown and "_INBOX_ghost.1" in shown and "permission_violation" in shown
    assert "[/][conceal]hidden[/conceal]" in shown and "\\x1b[8m" in shown


def test_the_trail_shows_a_security_events_kind_and_detail() -> None:
    payload = '{"type": "security.event", "kind": "decision_forged", "detail": "not signed by the policy key"}'
    record = {
        "sequence": 7,
        "event_type": "security.event",
        "subject": "tg.security.executor.decision_forged",
        "payload": payload,
        "hash": "sha256:" + "b" * 64,
    }
    shown = _render(trail_table("r1", [record]))
    assert "kind=decision_forged" in shown and "not signed by the policy key" in shown


def test_a_sealed_secret_is_shown_as_a_label_never_its_ciphertext() -> None:
    ciphertext = "Q0lQSEVSVEVYVA" * 6 + "=="
    sealed = {"$sealed": ciphertext}
    shown = _render(approvals_blocks([_pending({"path": "a.txt", "content": sealed, "nested": {"token": sealed}})]))
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


def test_the_tools_table_shows_the_budget_each_operation_uses() -> None:
    spec = OperationSpec(
        input_schema={}, output_schema={}, side_effect_class=SideEffectClass.READ_ONLY, risk_tier=RiskTier.LOW
    )
    own = msgspec.structs.replace(spec, rate_limit=RateLimit(calls=2, period_s=10.0))
    tool = ToolDescriptor(name="t", version="1.0.0", adapter="x", operations={"shared": spec, "limited": own})
    rows = {line.split("│")[3].strip(): line for line in _render(tools_table([tool])).splitlines() if "│" in line}
    assert "60/60s" in rows["shared"] and "(own)" not in rows["shared"]
    assert "2/10s (own)" in rows["limited"]


def test_the_tools_table_marks_open_world_operations() -> None:
    spec = OperationSpec(
        input_schema={}, output_schema={}, side_effect_class=SideEffectClass.READ_ONLY, risk_tier=RiskTier.LOW
    )
    fetch = msgspec.structs.replace(spec, open_world=True)
    tool = ToolDescriptor(name="t", version="1.0.0", adapter="x", operations={"local": spec, "fetch": fetch})
    table = _render(tools_table([tool]))
    rows = {line.split("│")[3].strip(): line for line in table.splitlines() if "│" in line}
    assert "open world" in rows["fetch"] and "open world" not in rows["local"]


def _quorum_pending() -> dict[str, object]:
    request_id, key = "0f" * 16, "k" + "9" * 31
    pending = _pending({"path": "notes/report.txt", "content": "quarterly numbers " * 8})
    return {
        **pending,
        "approval_id": "ap-0123456789ab",
        "request_id": request_id,
        "joined": ["1e" * 16],
        "idempotency_key": key,
        "votes": ["alice"],
        "approvals_required": 2,
        "approvers": ["alice", "bob"],
        "policy_id": "two-operators",
        "side_effect_class": "REVERSIBLE_WRITE",
        "risk_tier": "medium",
        "related": [
            {"approval_id": "ap-aaaaaaaaaaaa", "request_id": "r-old", "state": "granted", "same_key": False}
            | {"receipt_id": "receipt-77", "outcome": "succeeded"},
            {"approval_id": "ap-bbbbbbbbbbbb", "request_id": "r-other", "state": "pending", "same_key": True},
        ],
    }


def _render_at(table: object, width: int) -> str:
    out = StringIO()
    Console(file=out, width=width, color_system=None).print(table)
    return out.getvalue()


def test_approvals_list_is_one_stacked_block_per_approval_within_80_columns() -> None:
    item = {**_quorum_pending(), "opened_at": "2026-11-29T11:55:00Z"}
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    shown = _render_at(approvals_blocks([item, {**item, "approval_id": "ap-second"}], now), 80)
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert min(len(line.strip()) for line in lines if line.strip()) > 1, "no value wraps one character per line"
    for whole in ("ap-0123456789ab", "ap-second", "0f" * 16, "1e" * 16, "k" + "9" * 31, "two-operators"):
        assert any(whole in line for line in lines), f"{whole} is cut or wrapped"
    assert "1 of 2: alice" in shown and "role operator: alice, bob" in shown
    assert "REVERSIBLE_WRITE, medium" in shown and "demo-agent" in shown
    assert "2026-11-29 11:55:00 UTC (5m ago)" in shown and "(in 0s)" not in shown
    assert any("sha256:aaaaaaaaaaaa…" in line for line in lines), "the request hash shortened, on one line"
    assert "a" * 13 not in shown, "the whole hash is for --json"
    related = [line for line in lines if "ap-aaaaaaaaaaaa" in line or "ap-bbbbbbbbbbbb" in line]
    assert "granted, OTHER key" in related[0] and "succeeded" in shown and "receipt-77" in shown
    assert "pending, same key" in related[1]


def test_an_accepted_answer_prints_the_vote_count_or_the_grant() -> None:
    voted = {"ok": True, "reason_code": "voted", "reason": "vote 1 of 2 recorded on ap-1 (alice)"}
    granted = {"ok": True, "reason_code": "granted", "reason": "ap-1 granted by alice, bob"}
    assert decide_line(voted).plain == "vote 1 of 2 recorded on ap-1 (alice)"
    assert decide_line(granted).plain == "ap-1 granted by alice, bob"
    assert decide_line({"reason_code": "granted", "reason": HOSTILE}).plain == "[/][conceal]hidden[/conceal]\\x1b[8mx"


def test_the_tools_table_shows_each_tools_state_and_why() -> None:
    spec = OperationSpec(
        input_schema={}, output_schema={}, side_effect_class=SideEffectClass.READ_ONLY, risk_tier=RiskTier.LOW
    )
    tools = [
        ToolDescriptor(name=name, version="1.0.0", adapter="x", operations={"op": spec})
        for name in ("mcp_git", "mcp_notes", "file_system")
    ]
    since = datetime(2026, 11, 30, 21, 4, 5, tzinfo=UTC)
    states = {
        "mcp_git": ToolState(state="ready", reason="12 tools, 0.8 s", since=since),
        "mcp_notes": ToolState(state="degraded", reason="circuit open after 5 consecutive faults", since=since),
    }
    rows = {
        line.split("│")[1].strip(): line for line in _render(tools_table(tools, states)).splitlines() if "│" in line
    }

    assert "ready since 21:04:05" in rows["mcp_git"]
    assert "degraded since 21:04:05" in rows["mcp_notes"] and "circuit" not in rows["mcp_notes"]
    assert "since" not in rows["file_system"]
    reasons = [line.plain for line in state_reasons(tools, states)]
    assert reasons == ["mcp_notes degraded: circuit open after 5 consecutive faults"]


def test_a_long_reason_is_printed_whole_under_the_table_at_80_columns() -> None:
    spec = OperationSpec(
        input_schema={}, output_schema={}, side_effect_class=SideEffectClass.READ_ONLY, risk_tier=RiskTier.LOW
    )
    tools = [ToolDescriptor(name="mcp_greeter", version="0.0.1", adapter="x", operations={"greet": spec})]
    why = "ended its connection during start-up (the command exited or closed stdout): greet server: BROKEN [x]"
    states = {"mcp_greeter": ToolState(state="unavailable", reason=why, since=datetime(2026, 12, 1, tzinfo=UTC))}

    table = _render_at(tools_table(tools, states), 80)
    (line,) = state_reasons(tools, states)

    assert max(len(row) for row in table.splitlines()) <= 80
    assert len([row for row in table.splitlines() if "│" in row]) <= 3, table  # header and one row, not folded
    assert line.plain == f"mcp_greeter unavailable: {why}"


def test_an_item_of_the_listing_that_is_no_approval_is_said_and_the_others_shown() -> None:
    shown = _render_at(approvals_blocks([{"approval_id": "ap-broken"}, _quorum_pending()]), 200)
    assert "an item of the listing is no approval" in shown and "missing required field" in shown
    assert "ap-0123456789ab" in shown and "REVERSIBLE_WRITE, medium" in shown
