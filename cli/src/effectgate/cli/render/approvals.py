"""``approvals list`` as one stacked block per approval, readable in an 80-column terminal.

Each block is a label column (a dozen characters, never wrapped) and a value column that wraps
between words and folds only a word longer than the line (a long argument): no argument is cut,
and no column is ever squeezed to one character per line. The request hash is shortened
(``sha256:<12 hex>…``); ``approvals list --json`` has it whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from effectgate.cli.render.fitted import short_digest
from effectgate.cli.render.views import OUTCOME_STYLE, plain_text
from effectgate.contracts.events import Related
from effectgate.contracts.rpc.approvals import PendingApproval
from effectgate.contracts.tools.contents import ContentState, content_lines
from effectgate.contracts.tools.secret_arguments import redact_sealed

__all__ = ["approvals_blocks", "when"]


def _moment(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
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


def _related_line(related: Related) -> Text:
    """One related approval: its id, state and key, and its receipt when its request ended."""
    key = "same key: approving it again runs nothing new" if related.same_key else "OTHER key: a second effect"
    line = plain_text(f"{related.approval_id} {related.state}, {key}")
    if related.receipt_id:
        style = OUTCOME_STYLE.get(str(related.outcome), "white")
        line += Text("; ran: ") + plain_text(str(related.outcome), f"bold {style}")
        line += plain_text(f" (receipt {related.receipt_id}, request {related.request_id})")
    return line


def _file_lines(item: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``file`` rows: one line per file reference (:func:`~effectgate.contracts.tools.contents.content_lines`)."""
    try:
        states = msgspec.convert(item.get("contents") or [], tuple[ContentState, ...])
    except msgspec.ValidationError:
        return ("(the listing's file states are unreadable: the approval binds what the approvals service holds)",)
    return content_lines(states)


def _arguments(item: PendingApproval) -> Any:
    """The arguments in full, or, when the listing left them out, their size and how to read them."""
    if "arguments" in item.omitted:
        size = item.arguments_bytes
        return Text(f"{size} bytes, left out: effectgate approvals show {item.approval_id}", style="yellow")
    return redact_sealed(item.request.arguments)


def _fields(item: PendingApproval, files: tuple[str, ...], now: datetime) -> list[tuple[str, Any]]:
    request, votes = item.request, item.votes
    risk = ", ".join(str(v) for v in (item.side_effect_class, item.risk_tier) if v)
    quorum = Text(f"{len(votes)} of {item.approvals_required}", style="bold")
    quorum += plain_text(f": {', '.join(votes)}" if votes else "")
    return [
        ("tool", f"{request.tool}@{request.version}"),
        ("operation", request.operation),
        ("principal", item.principal),
        ("risk", risk or "-"),
        ("requested", when(item.opened_at, now) if item.opened_at else "-"),
        ("expires", when(item.expires_at, now)),
        ("quorum", quorum),
        ("approvers", f"role {item.approver_role}: " + (", ".join(item.approvers) or "-")),
        ("request", item.request_id),
        *[("joined", joined) for joined in item.joined],
        ("arguments", _arguments(item)),  # in full (a sealed secret as a label): what would run
        *[("file", line) for line in files],
        ("key", item.idempotency_key or "-"),
        ("policy", item.policy_id or "-"),
        ("hash", short_digest(item.request_hash)),  # whole in `approvals list --json`
        *[("related", _related_line(related)) for related in item.related],
        *([("left out", ", ".join(item.omitted))] if item.omitted else []),
    ]


def _typed(item: Mapping[str, Any]) -> PendingApproval | str:
    """``item`` as the listing's type (its file states read apart), or why it is none."""
    try:
        return msgspec.convert({**item, "contents": []}, PendingApproval)
    except msgspec.ValidationError as error:
        return f"(an item of the listing is no approval: {error})"


def _block(item: Mapping[str, Any], now: datetime) -> RenderableType:
    typed = _typed(item)
    if isinstance(typed, str):
        return Group(plain_text(typed, "yellow"), Text(""))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in _fields(typed, _file_lines(item), now):
        grid.add_row(label, value if isinstance(value, Text) else plain_text(value))
    head = plain_text(typed.approval_id, "bold cyan")
    return Group(head, Padding(grid, (0, 0, 1, 2)))


def approvals_blocks(
    pending: Sequence[Mapping[str, Any]], now: datetime | None = None, title: str | None = None
) -> Group:
    """Pending approvals (``tg.approvals.list`` items), one block each: exactly what it would run and who answers.

    Args:
        pending: the listed approvals, as the listing sent them (JSON objects).
        now: the time ages are counted from (default: now, UTC).
        title: the heading (default: how many are pending).
    """
    moment = now or datetime.now(UTC)
    heading = title or f"{len(pending)} pending approval{'s' if len(pending) != 1 else ''}"
    return Group(Text(heading, style="bold"), Text(""), *(_block(item, moment) for item in pending))
