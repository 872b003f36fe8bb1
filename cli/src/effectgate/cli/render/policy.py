"""How ``effectgate policy simulate`` and ``explain`` print: rich tables and panels, or JSON."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from effectgate.cli.render.fitted import Column, FittedTable
from effectgate.policy.what_if.explain import ActionAnswer, Explanation
from effectgate.policy.what_if.simulation import Change, Report

__all__ = ["changes_table", "explanation_panel", "report_json", "summary_line"]


def _inert(value: Any) -> Text:
    """Bus- or file-supplied text as an inert cell: no Rich markup, no terminal control codes."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return Text("".join(c if c.isprintable() or c == "\n" else repr(c)[1:-1] for c in text))


def changes_table(report: Report) -> FittedTable:
    """One row per tool, principal and change (verdict before → after), with the request ids.

    Where the table cannot fit, one block per row; each request id is whole on a line of its own.
    """
    groups: dict[tuple[str, str, str, str], list[Change]] = defaultdict(list)
    for change in report.changes:
        case = change.case
        groups[(case.tool, case.principal, case.before.value, change.after.value)].append(change)
    columns = [Column("tool"), Column("principal"), Column("before → after"), Column("reason now", False)]
    table = FittedTable("What would change", [*columns, Column("request ids", False)])  # ids whole, to paste
    for (tool, principal, before, after), changes in sorted(groups.items()):
        codes = sorted({change.after_code for change in changes})
        ids = Text("\n").join(_inert(change.case.request_id) for change in changes)
        cells = (tool, principal, f"{before} → {after}", ", ".join(codes))
        table.add_row(*(_inert(cell) for cell in cells), ids)
    return table


def summary_line(report: Report, since: datetime) -> str:
    """``N decisions since … compared: M would change; K not comparable (why: count, …)``."""
    line = f"{report.compared} decisions since {since.isoformat(timespec='seconds')} compared: "
    line += f"{len(report.changes)} would change"
    if skipped := sum(report.not_comparable.values()):
        reasons = "; ".join(f"{why}: {count}" for why, count in sorted(report.not_comparable.items()))
        line += f"; {skipped} not comparable ({reasons})"
    return line


def report_json(report: Report, since: datetime, version: str) -> str:
    """The report as one JSON object (``--json``)."""
    changes = [
        {
            "request_id": change.case.request_id,
            "principal": change.case.principal,
            "tool": change.case.tool,
            "version": change.case.version,
            "operation": change.case.operation,
            "decided_at": change.case.occurred_at.isoformat(),
            "before": change.case.before.value,
            "before_code": change.case.before_code,
            "after": change.after.value,
            "after_code": change.after_code,
            "decided_by": change.case.policy_version,
        }
        for change in report.changes
    ]
    body = {"candidate": version, "since": since.isoformat(), "compared": report.compared, "changes": changes}
    return json.dumps(body | {"not_comparable": dict(report.not_comparable)}, indent=2)


def explanation_panel(title: str, explained: Explanation) -> Panel:
    """The verdict, the context the rules saw, and each action's determining policies."""
    outcome = explained.outcome
    lines: list[RenderableType] = [
        Text.assemble(("verdict: ", "bold"), _inert(f"{explained.verdict.value} ({outcome.reason_code})")),
        _inert(outcome.reason),
    ]
    if explained.hidden:
        lines.append(Text("no arguments could open this call for the principal: it is denied as if it did not exist"))
    if explained.context is None:
        lines.append(Text("an argument cannot be given to the policy (argument_untypable): no rule was evaluated"))
    else:
        lines += [Text("context the rules saw:", style="bold"), _inert(json.dumps(explained.context, indent=2))]
    lines += [_action(answer) for answer in explained.answers]
    return Panel(Group(*lines), title=_inert(title).plain, title_align="left")


def _action(answer: ActionAnswer) -> RenderableType:
    said = "allowed" if answer.allowed else "not allowed"
    head = Text.assemble((f"action {answer.action}: ", "bold"), (said, "green" if answer.allowed else "red"))
    parts: list[RenderableType] = [head]
    if not answer.determining:
        parts.append(Text("  no policy applied" if not answer.allowed else "  (no determining policy reported)"))
    for view in answer.determining:
        notes = ", ".join(f"@{key}({value!r})" for key, value in sorted(view.annotations.items()) if key != "id")
        parts.append(Text.assemble("  ", (view.effect, "bold"), " ", _inert(view.id), "  ", _inert(notes)))
        parts.append(_inert("\n".join("    " + line for line in view.source.splitlines())))
    parts += [_inert(f"  error: {error}") for error in answer.errors]
    return Group(*parts)
