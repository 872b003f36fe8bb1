"""``approvals list`` as one stacked block per approval, readable in an 80-column terminal.

Each block is a label column (a dozen characters, never wrapped) and a value column that
wraps between words and folds only a word longer than the line (a long argument): no
argument is cut, and no column is ever squeezed to one character per line. The request hash
is shortened (``sha256:<12 hex>…``); ``approvals list --json`` has it whole. A call that names
files has a ``file`` row per reference: what it named when the approval opened, and whether
the approval binds that content or the reference only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from toolgate.cli.fitted import short_digest
from toolgate.cli.render import OUTCOME_STYLE, plain_text
from toolgate.contracts.contents import ContentState, content_lines
from toolgate.contracts.secret_arguments import redact_sealed

__all__ = ["approvals_blocks", "when"]


def _moment(value: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def when(value: Any, now: datetime) -> str:
    """``2026-11-30 10:00:00 UTC (5m ago)`` / ``(in 2h)``; the text as given when it is not a time."""
    moment = _moment(value)
    if moment is None:
        return str(value)
    delta = (moment - now).total_seconds()
    relative = f"in {_span(delta)}" if delta > 0 else f"{_span(-delta)} ago"
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC ({relative})"


def _related_line(related: dict[str, Any]) -> Text:
    """One related approval: its id, state and key, and its receipt when its request ended."""
    key = "same key: approving it again runs nothing new" if related.get("same_key") else "OTHER key: a second effect"
    line = plain_text(f"{related['approval_id']} {related['state']}, {key}")
    if related.get("receipt_id"):
        style = OUTCOME_STYLE.get(str(related.get("outcome")), "white")
        line += Text("; ran: ") + plain_text(str(related.get("outcome")), f"bold {style}")
        line += plain_text(f" (receipt {related['receipt_id']}, request {related['request_id']})")
    return line


def _file_lines(item: dict[str, Any]) -> tuple[str, ...]:
    """The ``file`` rows: one line per file reference (:func:`~toolgate.contracts.contents.content_lines`)."""
    try:
        states = msgspec.convert(item.get("contents") or [], tuple[ContentState, ...])
    except msgspec.ValidationError:
        return ("(the listing's file states are unreadable: the approval binds what the approvals service holds)",)
    return content_lines(states)


def _arguments(item: dict[str, Any]) -> Any:
    """The arguments in full, or, when the listing left them out, their size and how to read them."""
    if "arguments" in (item.get("omitted") or []):
        size = item.get("arguments_bytes")
        return Text(f"{size} bytes, left out: toolgate approvals show {item['approval_id']}", style="yellow")
    return redact_sealed(item["request"]["arguments"])


def _fields(item: dict[str, Any], now: datetime) -> list[tuple[str, Any]]:
    request, votes = item["request"], list(item.get("votes") or [])
    required = item.get("approvals_required") or 1
    risk = ", ".join(str(v) for v in (item.get("side_effect_class"), item.get("risk_tier")) if v)
    quorum = Text(f"{len(votes)} of {required}", style="bold") + plain_text(f": {', '.join(votes)}" if votes else "")
    return [
        ("tool", f"{request['tool']}@{request['version']}"),
        ("operation", request["operation"]),
        ("principal", item["principal"]),
        ("risk", risk or "-"),
        ("requested", when(item["opened_at"], now) if item.get("opened_at") else "-"),
        ("expires", when(item["expires_at"], now)),
        ("quorum", quorum),
        ("approvers", f"role {item['approver_role']}: " + (", ".join(item.get("approvers") or []) or "-")),
        ("request", item["request_id"]),
        *[("joined", joined) for joined in item.get("joined") or []],
        ("arguments", _arguments(item)),  # in full (a sealed secret as a label): what would run
        *[("file", line) for line in _file_lines(item)],
        ("key", item.get("idempotency_key") or "-"),
        ("policy", item.get("policy_id") or "-"),
        ("hash", short_digest(item["request_hash"])),  # whole in `approvals list --json`
        *[("related", _related_line(related)) for related in item.get("related") or []],
        *([("left out", ", ".join(item["omitted"]))] if item.get("omitted") else []),
    ]


def _block(item: dict[str, Any], now: datetime) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in _fields(item, now):
        grid.add_row(label, value if isinstance(value, Text) else plain_text(value))
    head = plain_text(item["approval_id"], "bold cyan")
    return Group(head, Padding(grid, (0, 0, 1, 2)))


def approvals_blocks(pending: list[dict[str, Any]], now: datetime | None = None, title: str | None = None) -> Group:
    """Pending approvals (``tg.approvals.list`` items), one block each: exactly what it would run and who answers.

    Args:
        pending: the listed approvals.
        now: the time ages are counted from (default: now, UTC).
        title: the heading (default: how many are pending).
    """
    moment = now or datetime.now(UTC)
    heading = title or f"{len(pending)} pending approval{'s' if len(pending) != 1 else ''}"
    return Group(Text(heading, style="bold"), Text(""), *(_block(item, moment) for item in pending))
