"""``effectgate requests``: recent requests and how each ended, from the audit (``tg.audit.requests``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

from effectgate.cli.client import rpc
from effectgate.cli.client.session import NatsUrl, console, err_console, on_bus
from effectgate.cli.render.approvals import when
from effectgate.cli.render.output import AsJson, print_json
from effectgate.cli.render.views import OUTCOME_STYLE, one_line
from effectgate.contracts.bus.catalog import Rpc

__all__ = ["parse_since", "requests_command"]

_SINCE = re.compile(r"^(\d{1,6})([smhd])\Z")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str) -> timedelta:
    """``30s``, ``15m``, ``1h``, ``2d`` as a duration.

    Raises:
        typer.BadParameter: anything else (the message shows the accepted forms).
    """
    found = _SINCE.match(text.strip())
    if not found or int(found[1]) == 0:
        raise typer.BadParameter(
            f"{text!r} is not a duration: use a positive number and s, m, h or d (30s, 15m, 1h, 2d)"
        )
    return timedelta(**{_UNITS[found[2]]: int(found[1])})


Principal = Annotated[str | None, typer.Option("--principal", help="Only this agent's requests.")]
Since = Annotated[
    timedelta | None,
    typer.Option("--since", parser=parse_since, metavar="30s|15m|1h|2d", help="Only requests this recent."),
]
Limit = Annotated[int, typer.Option("--limit", help="At most this many requests (1-200), newest first.")]


def _line(item: dict[str, Any], now: datetime) -> RenderableType:
    outcome = item.get("outcome") or ("pending" if item.get("verdict") == "needs_approval" else "open")
    style = OUTCOME_STYLE.get(str(outcome), "yellow")
    call = f"{item.get('tool')}@{item.get('version') or 'latest'}.{item.get('operation')}"
    head = Text.assemble((f"{outcome:<10}", f"bold {style}"), one_line(f"{call}  by {item.get('principal')}"))
    detail = one_line(f"{when(item.get('requested_at'), now)} · request {item.get('request_id')}")
    why = f"{item.get('reason_code')}: {item.get('reason')}" if item.get("reason_code") else "no decision yet"
    return Group(head, Padding(Group(detail, one_line(why)), (0, 0, 0, 2)))  # what an agent sent spans no lines


def requests_command(
    principal: Principal = None, since: Since = None, limit: Limit = 20, as_json: AsJson = False, nats_url: NatsUrl = ""
) -> None:
    """List recent requests (newest first) with their decision and receipt, from the audit trail."""
    body: dict[str, Any] = {"principal": principal, "limit": limit}
    if since is not None:
        body["since"] = (datetime.now(UTC) - since).isoformat()
    reply: dict[str, Any] = on_bus(nats_url, lambda bus: rpc.request(bus, Rpc.AUDIT_REQUESTS, body))
    if not reply.get("ok"):
        err_console.print("[red]refused:[/red]", escape(str(reply.get("reason"))))
        raise typer.Exit(1)
    if as_json:
        print_json(reply["requests"])
        return
    now, found = datetime.now(UTC), reply["requests"]
    console.print(Group(*(_line(item, now) for item in found)) if found else "no requests recorded")
