"""Rich renderings of tools, receipts, approvals and audit records."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from rich.table import Table
from rich.text import Text

from toolgate.shared.descriptors import ToolDescriptor, rate_of
from toolgate.shared.events import ReceiptIssued
from toolgate.shared.secret_arguments import redact_sealed
from toolgate.shared.tool_states import ToolState

__all__ = [
    "OUTCOME_STYLE",
    "alarm_row",
    "alarms_table",
    "approvals_table",
    "decide_line",
    "receipt_row",
    "receipts_table",
    "tools_table",
    "trail_table",
    "utc_time",
]

OUTCOME_STYLE = {
    "succeeded": "green",
    "replayed": "cyan",
    "denied": "red",
    "refused": "yellow",
    "failed": "red",
    "uncertain": "magenta",
}


def _short(value: Any, limit: int = 70) -> str:
    text = (
        value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plain(value: Any) -> Text:
    """Agent- or bus-supplied text as an inert cell: no Rich markup, no terminal control codes."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return Text("".join(c if c.isprintable() else repr(c)[1:-1] for c in text))


def _row(table: Table, *cells: Any) -> None:
    table.add_row(*(cell if isinstance(cell, Text) else _plain(cell) for cell in cells))


def tools_table(tools: list[ToolDescriptor], states: dict[str, ToolState] | None = None) -> Table:
    """One row per operation: tool, version, operation, side-effect class, risk tier, rate limit, state.

    An open-world operation's class is marked ``open world``. The rate limit is the
    budget the operation uses (``descriptors.rate_of``): its own, marked ``(own)``, or
    the tool's shared one. The state is the one the registry recorded (``ready``,
    ``unavailable: <why>``, ``degraded: <why>``, with the time it began), empty for a
    tool without a server to watch.
    """
    table = Table(title="Registered tools", show_lines=False)
    for column in ("tool", "version", "operation", "side-effect class", "risk", "rate limit", "state"):
        table.add_column(column, overflow="fold")
    for tool in tools:
        state = _state((states or {}).get(tool.name))
        for name, spec in sorted(tool.operations.items()):
            bucket, rate = rate_of(tool, name)
            shown = f"{rate.calls}/{rate.period_s:g}s" + (" (own)" if bucket != tool.name else "")
            effect = spec.side_effect_class.value + (" (open world)" if spec.open_world else "")
            _row(table, tool.name, tool.version, name, effect, spec.risk_tier.value, shown, state)
    return table


def _state(state: ToolState | None) -> Text:
    if state is None:
        return Text("")
    since = state.since.strftime("%H:%M:%S")
    if state.state == "ready":
        return Text(f"ready since {since}", style="green")
    return Text(f"{state.state} since {since}: {_short(state.reason, 90)}", style="red")


def receipts_table(title: str) -> Table:
    """An empty table for :func:`receipt_row` rows."""
    table = Table(title=title, show_lines=True)
    for column in ("step", "call", "outcome", "reason", "result"):
        table.add_column(column, overflow="fold")
    return table


def receipt_row(table: Table, step: str, call: str, receipt: ReceiptIssued) -> None:
    """Add one receipt: its outcome coloured, its reason and a short result."""
    style = OUTCOME_STYLE.get(receipt.outcome.value, "white")
    result = "" if receipt.result is None else _short(receipt.result)
    _row(
        table,
        step,
        call,
        Text(receipt.outcome.value, style=f"bold {style}"),
        f"{receipt.reason_code}: {_short(receipt.reason, 90)}",
        result,
    )


def approvals_table(pending: list[dict[str, Any]]) -> Table:
    """Pending approvals: per approval, exactly what it would let run and where its answer stands.

    Two columns, so every value keeps the width of the terminal (usable at 100 columns):
    the approval id (what ``approve``/``reject`` take), and a grid of the request id(s),
    the call, its arguments in full, the idempotency key, the votes so far of the quorum,
    who may answer, the policy that asked, the expiry, the first 12 hex of the request
    hash, and the related approvals of the same call (with their receipts).
    """
    table = Table(title="Pending approvals", show_lines=True)
    table.add_column("approval", no_wrap=True, min_width=15)
    table.add_column("what it would run, and who answers", overflow="fold", ratio=1)
    for item in pending:
        table.add_row(_plain(item["approval_id"]), _approval_grid(item))
    return table


def decide_line(answer: dict[str, Any]) -> Text:
    """The line an accepted answer prints: the service's reason, coloured by what happened.

    E.g. ``vote 1 of 2 recorded on ap-… (alice)``, ``ap-… granted by alice, bob``,
    ``alice already voted on ap-… (vote 1 of 2)``.
    """
    styles = {"granted": "bold green", "rejected": "bold red", "voted": "green", "withdrawn": "yellow"}
    line = _plain(str(answer.get("reason")))
    line.stylize(styles.get(str(answer.get("reason_code")), "yellow"))
    return line


def _approval_grid(item: dict[str, Any]) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in _approval_fields(item):
        grid.add_row(label, value if isinstance(value, Text) else _plain(value))
    return grid


def _approval_fields(item: dict[str, Any]) -> list[tuple[str, Any]]:
    request, votes = item["request"], list(item.get("votes") or [])
    required = item.get("approvals_required") or 1
    class_and_risk = ", ".join(str(v) for v in (item.get("side_effect_class"), item.get("risk_tier")) if v)
    fields: list[tuple[str, Any]] = [
        ("request", item["request_id"]),
        *[("joined", joined) for joined in item.get("joined") or []],
        ("principal", item["principal"]),
        ("call", f"{request['tool']}@{request['version']}.{request['operation']}"),
        ("class", class_and_risk or "-"),
        ("arguments", redact_sealed(request["arguments"])),  # in full (a sealed secret as a label): what would run
        ("key", item.get("idempotency_key") or "-"),
        ("votes", Text(f"{len(votes)} of {required}", style="bold") + _plain(f": {', '.join(votes)}" if votes else "")),
        ("approvers", f"role {item['approver_role']}: " + (", ".join(item.get("approvers") or []) or "-")),
        ("policy", item.get("policy_id") or "-"),
        ("expires", f"{str(item['expires_at'])[:19].replace('T', ' ')} UTC"),
        ("hash", str(item["request_hash"]).removeprefix("sha256:")[:12]),
    ]
    return fields + [("related", _related_line(related)) for related in item.get("related") or []]


def _related_line(related: dict[str, Any]) -> Text:
    """One related approval: its id, state and key, and its receipt when its request ended."""
    key = "same key: approving it again runs nothing new" if related.get("same_key") else "OTHER key: a second effect"
    line = _plain(f"{related['approval_id']} {related['state']}, {key}")
    if related.get("receipt_id"):
        style = OUTCOME_STYLE.get(str(related.get("outcome")), "white")
        line += Text("; ran: ") + Text(str(related.get("outcome")), style=f"bold {style}")
        line += _plain(f" (receipt {related['receipt_id']}, request {related['request_id']})")
    return line


def trail_table(request_id: str, records: list[dict[str, Any]]) -> Table:
    """The audit records of one request, in chain order (``sequence`` ascending), numbered by it.

    Args:
        request_id: the request, shown in the title.
        records: ``AuditRecord`` objects as JSON (``occurred_at`` shown as ISO 8601 UTC).
    """
    table = Table(title=_plain(f"Audit trail of {request_id}"), show_lines=True)
    for column in ("#", "when (UTC)", "event", "subject", "detail", "record hash"):
        table.add_column(column, overflow="fold")
    for record in sorted(records, key=lambda record: int(record["sequence"])):
        _row(
            table,
            str(record["sequence"]),
            utc_time(record.get("occurred_at")),
            record["event_type"],
            record["subject"],
            _detail(record["payload"]),
            record["hash"][:19] + "…",
        )
    return table


def utc_time(value: Any) -> str:
    """``value`` (ISO 8601 text, or seconds since the epoch) as ``YYYY-MM-DDTHH:MM:SS.mmmZ``; other text as it is."""
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            moment = datetime.fromtimestamp(value, UTC)
        else:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        return "" if value is None else str(value)
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _detail(payload: str) -> str:
    try:
        event = json.loads(payload)
    except ValueError:
        return _short(payload)
    keys = (
        *("kind", "actor", "verdict", "outcome", "hidden_reason_code", "reason_code", "reason", "detail"),
        *("approver", "approver_role", "operation", "arguments"),
    )
    shown = ", ".join(f"{k}={_short(redact_sealed(event[k]), 40)}" for k in keys if event.get(k) is not None)
    return _short(shown, 120)


def alarms_table(title: str = "Security events") -> Table:
    """An empty table for :func:`alarm_row` rows."""
    table = Table(title=title, show_lines=True)
    for column in ("#", "when (UTC)", "kind", "seen by", "actor", "about", "reason", "detail"):
        table.add_column(column, overflow="fold")
    return table


def alarm_row(table: Table, alarm: dict[str, Any]) -> None:
    """Add one alarm (an ``Alarm`` as JSON): chain position, kind in red, who, what about, why."""
    event = alarm["event"]
    about = "/".join(str(event[k]) for k in ("principal", "request_id", "approval_id") if event.get(k))
    _row(
        table,
        str(alarm["sequence"]),
        utc_time(event["occurred_at"]),
        Text(str(event["kind"]), style="bold red"),
        alarm["service"],
        event.get("actor") or "",
        about or event.get("subject") or "",
        event.get("reason_code") or "",
        event.get("detail") or "",
    )
