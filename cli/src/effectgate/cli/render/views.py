"""Rich renderings of tools, receipts, approvals and audit records."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from effectgate.cli.render.fitted import Column, FittedTable, short_digest
from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.replays import ended_as, outcome_label
from effectgate.contracts.tools.descriptors import ToolDescriptor, rate_of
from effectgate.contracts.tools.secret_arguments import redact_sealed
from effectgate.contracts.tools.tool_states import ToolState

__all__ = [
    "OUTCOME_STYLE",
    "alarm_row",
    "alarms_table",
    "one_line",
    "state_line",
    "state_reasons",
    "unregistered_line",
    "plain_text",
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
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plain(value: Any) -> Text:
    """Agent- or bus-supplied text as an inert cell: no Rich markup, no terminal control codes."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return Text("".join(c if c.isprintable() else repr(c)[1:-1] for c in text))


def _styled(value: Any, style: str) -> Text:
    """``value`` as an inert cell in ``style``."""
    shown = _plain(value)
    shown.stylize(style)
    return shown


def one_line(value: Any) -> Text:
    """``value`` as inert text on one line: line breaks and control codes are shown as escapes."""
    return _plain(value)


def plain_text(value: Any, style: str = "") -> Text:
    """``value`` as inert text (no markup, no control codes; its line breaks kept), in ``style``."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    shown = Text("\n").join(_plain(line) for line in text.split("\n"))
    shown.stylize(style)
    return shown


def _row(table: FittedTable, *cells: Any) -> None:
    table.add_row(*(cell if isinstance(cell, Text) else _plain(cell) for cell in cells))


TOOL_COLUMNS = ("tool", "version", "operation", "side-effect class", "risk", "rate limit", "state")


def tools_table(tools: list[ToolDescriptor], states: dict[str, ToolState] | None = None) -> FittedTable:
    """One row per operation: tool, version, operation, side-effect class, risk tier, rate limit, state.

    An open-world operation's class is marked ``open world``. The rate limit is the
    budget the operation uses (``descriptors.rate_of``): its own, marked ``(own)``, or
    the tool's shared one. The state is the one the registry recorded (``ready``,
    ``unavailable``, ``degraded``, with the time it began), empty for a tool without a
    server to watch; why a tool is not ready goes under the table (:func:`state_reasons`),
    whole, where a narrow column would fold it word by word. Where the table cannot fit, each
    tool is a line (name, version, state) over one line per operation.
    """
    table = FittedTable("Registered tools", [Column(name) for name in TOOL_COLUMNS], blocks=_tool_blocks)
    for tool in tools:
        state = _state((states or {}).get(tool.name))
        for name, spec in sorted(tool.operations.items()):
            bucket, rate = rate_of(tool, name)
            shown = f"{rate.calls}/{rate.period_s:g}s" + (" (own)" if bucket != tool.name else "")
            effect = spec.side_effect_class.value + (" (open world)" if spec.open_world else "")
            _row(table, tool.name, tool.version, name, effect, spec.risk_tier.value, shown, state)
    return table


def _tool_blocks(rows: list[list[Text]]) -> RenderableType:
    """Rows of :func:`tools_table` grouped by tool: ``tool version  state`` over a grid of its operations."""
    blocks: list[RenderableType] = [Text("Registered tools", style="italic")]
    for start, row in enumerate(rows):
        if start and rows[start - 1][:2] == row[:2]:
            continue
        operations = Table.grid(padding=(0, 2))
        for _ in range(4):
            operations.add_column(overflow="fold")
        for same in (later for later in rows[start:] if later[:2] == row[:2]):
            operations.add_row(*same[2:6])
        head = Text("  ").join(cell for cell in (row[0], row[1], row[6]) if cell)
        blocks += [head, Padding(operations, (0, 0, 0, 4))]
    return Group(*blocks)


def _state(state: ToolState | None) -> Text:
    if state is None:
        return Text("")
    style = "green" if state.state == "ready" else "red"
    return Text(f"{state.state} since {_since(state)}", style=style)


def _since(state: ToolState) -> str:
    return state.since.strftime("%H:%M:%S")


def state_line(tool: str, state: ToolState) -> Text:
    """``<tool>: <state> since HH:MM:SS[: <why>]``, green when ready, red otherwise.

    What a server wrote (its stderr in the reason) is inert: no markup, control codes,
    line or paragraph separators or bidirectional overrides reach the terminal.
    """
    line = Text.assemble(_plain(f"{tool}: {state.state}"), f" since {_since(state)}")
    line.stylize("green" if state.state == "ready" else "red", 0, len(tool) + len(state.state) + 2)
    if state.reason and state.state != "ready":
        line.append_text(Text.assemble(": ", _plain(state.reason)))
    return line


def unregistered_line(tool: str, state: ToolState) -> Text:
    """``<tool>: not registered yet (its MCP server could not be listed): <state> since HH:MM:SS: <why>``, inert."""
    head = f"{tool}: not registered yet (its MCP server could not be listed): {state.state} since {_since(state)}: "
    return Text.assemble(_plain(head), _plain(state.reason), style="red")


def state_reasons(tools: list[ToolDescriptor], states: dict[str, ToolState]) -> list[Text]:
    """One line per listed tool that is not ready: ``<tool> <state>: <why>`` (for under :func:`tools_table`)."""
    lines = []
    for tool in tools:
        state = states.get(tool.name)
        if state is not None and state.state != "ready":
            lines.append(Text.assemble((f"{tool.name} {state.state}", "red"), ": ", _plain(state.reason)))
    return lines


def receipts_table(title: str) -> FittedTable:
    """An empty table for :func:`receipt_row` rows (a block per receipt where it cannot fit)."""
    columns = [Column("step"), Column("call"), Column("outcome"), Column("reason", False, False)]
    return FittedTable(title, [*columns, Column("result", False)], show_lines=True)


def receipt_row(table: FittedTable, step: str, call: str, receipt: ReceiptIssued) -> None:
    """Add one receipt: its outcome coloured (a replay: ``replayed <stored outcome>``), reason and short result."""
    style = OUTCOME_STYLE.get(ended_as(receipt).value, "white")
    result = "" if receipt.result is None else _short(receipt.result)
    _row(
        table,
        step,
        call,
        Text(outcome_label(receipt), style=f"bold {style}"),
        f"{receipt.reason_code}: {_short(receipt.reason, 90)}",
        result,
    )


def decide_line(answer: dict[str, Any]) -> Text:
    """The line an accepted answer prints: the service's reason, coloured by what happened.

    E.g. ``vote 1 of 2 recorded on ap-… (alice)``, ``ap-… granted by alice, bob``,
    ``alice already voted on ap-… (vote 1 of 2)``.
    """
    styles = {"granted": "bold green", "rejected": "bold red", "voted": "green", "withdrawn": "yellow"}
    line = _plain(str(answer.get("reason")))
    line.stylize(styles.get(str(answer.get("reason_code")), "yellow"))
    return line


TRAIL_COLUMNS = (
    Column("#"),
    Column("when (UTC)"),
    Column("event"),
    Column("subject", False, False),
    Column("detail", False, False),
    Column("record hash"),
)


def trail_table(request_id: str, records: list[dict[str, Any]]) -> FittedTable:
    """The audit records of one request, in chain order (``sequence`` ascending), numbered by it.

    Where the table cannot fit, one block per record: ``# when event hash``, then its subject
    and its detail. Record hashes are shortened (:func:`~effectgate.cli.render.fitted.short_digest`).

    Args:
        request_id: the request, shown in the title.
        records: ``AuditRecord`` objects as JSON (``occurred_at`` shown as ISO 8601 UTC).
    """
    table = FittedTable(_plain(f"Audit trail of {request_id}"), TRAIL_COLUMNS, show_lines=True)
    for record in sorted(records, key=lambda record: int(record["sequence"])):
        _row(
            table,
            str(record["sequence"]),
            utc_time(record.get("occurred_at")),
            _styled(record["event_type"], "bold"),
            record["subject"],
            _detail(record["payload"]),
            Text(short_digest(str(record["hash"])), style="dim"),
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
        *("resolution", "resolved_by", "note"),
        *("approver", "approver_role", "operation", "arguments"),
    )
    shown = ", ".join(f"{k}={_short(redact_sealed(event[k]), 40)}" for k in keys if event.get(k) is not None)
    return _short(shown, 120)


ALARM_COLUMNS = (
    *(Column(name) for name in ("#", "when (UTC)", "kind", "seen by", "actor")),
    *(Column(name, False) for name in ("about", "reason", "detail")),
)


def alarms_table(title: str = "Security events") -> FittedTable:
    """An empty table for :func:`alarm_row` rows (a block per alarm where it cannot fit)."""
    return FittedTable(title, ALARM_COLUMNS, show_lines=True)


def alarm_row(table: FittedTable, alarm: dict[str, Any]) -> None:
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
