"""``effectgate budgets …``: do the spend counters agree with the receipts; resolve an uncertain call's spend.

``check`` reads every counter with its records from the policy service (``tg.policy.budgets``,
page by page) and every receipt from the audit export (``tg.audit.export``), then prints each
difference (:func:`effectgate.policy.budgets.reconciliation.differences`) and exits 1 when
there is any.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec
import typer
from rich.markup import escape

from effectgate.cli.client import rpc
from effectgate.cli.client.session import NatsUrl, console, err_console, on_bus
from effectgate.cli.render.fitted import Column, FittedTable
from effectgate.cli.render.output import AsJson, print_json
from effectgate.cli.render.views import one_line
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.rpc.audit import ExportQuery, ExportReply
from effectgate.contracts.rpc.policy import BudgetCounter, CountersQuery, CountersReply, ResolveQuery, ResolveReply
from effectgate.policy.budgets.reconciliation import Difference, differences, pending, receipt_outcomes
from effectgate.policy.budgets.rules import as_cost

__all__ = ["budgets_app"]

budgets_app = typer.Typer(help="Spend budgets: check the counters against the receipts.", no_args_is_help=True)

PAGE = 200
"""Counters asked for per ``tg.policy.budgets`` request."""

SettleS = Annotated[float, typer.Option(help="Seconds between the two looks (a difference must be seen in both).")]


@budgets_app.command("check")
def budgets_check(nats_url: NatsUrl = "", settle_s: SettleS = 5.0, as_json: AsJson = False) -> None:
    """Compare every budget counter with the receipts; print each difference, exit 1 when there is any."""
    counters, found, waiting = on_bus(nats_url, lambda bus: _twice(bus, settle_s))
    if as_json:
        print_json({"counters": counters, "differences": found, "pending": waiting})
        raise typer.Exit(1 if found else 0)
    console.print(_counters_table(counters))
    for row in waiting:
        console.print(escape(f"{row.kind}: {row.principal}/{row.request_id} ({row.budget}): {row.detail}"))
    if found:
        err_console.print(_differences_table(found))
        err_console.print(f"[red]{len(found)} difference(s)[/red] between the budget counters and the receipts")
        raise typer.Exit(1)
    console.print(f"[green]no difference[/green]: {len(counters)} counter(s) agree with the receipts")


@budgets_app.command("resolve")
def budgets_resolve(
    principal: str,
    request_id: str,
    ran: Annotated[bool, typer.Option("--ran/--not-run", help="Did the uncertain call's effect happen?")],
    nats_url: NatsUrl = "",
) -> None:
    """Resolve an uncertain call's reservation: --ran commits it, --not-run releases it."""
    body = ResolveQuery(principal=principal, request_id=request_id, ran=ran)
    reply = on_bus(nats_url, lambda bus: rpc.ask(bus, Rpc.POLICY_BUDGETS_RESOLVE, body, ResolveReply))
    if not reply.ok:
        err_console.print("[red]not resolved:[/red]", escape(reply.reason))
        raise typer.Exit(1)
    console.print(escape(reply.reason))


async def _twice(bus: rpc.Bus, settle_s: float) -> tuple[list[BudgetCounter], list[Difference], list[Difference]]:
    """Two looks ``settle_s`` apart: the second look's counters, the differences seen both times, what is pending."""
    counters, receipts = await _look(bus)
    first = differences(counters, receipts)
    if first:
        await asyncio.sleep(settle_s)
        counters, receipts = await _look(bus)
    seen = {_identity(d) for d in first}
    return counters, [d for d in differences(counters, receipts) if _identity(d) in seen], pending(counters, receipts)


def _identity(found: Difference) -> tuple[str, str, str, int, str | None]:
    return found.kind, found.principal, found.budget, found.start_s, found.request_id


async def _look(bus: rpc.Bus) -> tuple[list[BudgetCounter], dict[tuple[str, str], str]]:
    """The counters first, then the receipts: a receipt the ledger applied is already in the stream."""
    counters = await _counters(bus)
    return counters, receipt_outcomes(await _audit_records(bus))


async def _counters(bus: rpc.Bus) -> list[BudgetCounter]:
    found: dict[tuple[str, str, int], BudgetCounter] = {}  # SCAN may return a key twice
    cursor = 0
    while True:
        query = CountersQuery(cursor=cursor, count=PAGE)
        reply = await rpc.ask(bus, Rpc.POLICY_BUDGETS, query, CountersReply, timeout_s=10)
        if not reply.ok:
            raise rpc.BusError(f"the policy service refused the counters: {reply.reason}")
        found.update({(c.principal, c.budget, c.start_s): c for c in reply.counters})
        if (cursor := reply.cursor) == 0:
            return sorted(found.values(), key=lambda c: (c.principal, c.budget, c.start_s))


async def _audit_records(bus: rpc.Bus) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    after = 0
    while True:
        reply = await rpc.ask(bus, Rpc.AUDIT_EXPORT, ExportQuery(after=after), ExportReply, timeout_s=30)
        if not reply.ok:
            raise rpc.BusError(f"the audit service refused the export: {reply.reason}")
        page: list[dict[str, Any]] = msgspec.to_builtins(reply.records)
        if not page:
            return records
        records += page
        after = int(page[-1]["sequence"])


def _window(counter: BudgetCounter) -> str:
    start = datetime.fromtimestamp(counter.start_s, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return f"{start} UTC +{counter.window_s}s"


COUNTER_COLUMNS = (
    *(Column(name) for name in ("principal", "budget")),
    *(Column(name, False) for name in ("window", "used", "reserved", "limit", "calls")),
)
DIFFERENCE_COLUMNS = (
    *(Column(name) for name in ("difference", "principal", "budget", "request")),
    Column("detail", False),
)


def _counters_table(counters: list[BudgetCounter]) -> FittedTable:
    table = FittedTable("budget counters", COUNTER_COLUMNS)
    for c in counters:
        held = f"{len(c.records)}"
        used, reserved, limit = as_cost(c.used_units), as_cost(c.reserved_units), as_cost(c.limit_units)
        table.add_row(*map(one_line, (c.principal, c.budget, _window(c), used, reserved, limit, held)))
    return table


def _differences_table(found: list[Difference]) -> FittedTable:
    table = FittedTable("differences", DIFFERENCE_COLUMNS)
    for d in found:
        table.add_row(*map(one_line, (d.kind, d.principal, d.budget, d.request_id or "-", d.detail)))
    return table
