"""``effectgate uncertain …``: the calls whose effect is unknown, and the operator's word on one.

``list`` asks the executor (``tg.executor.uncertain.list``) page after page and prints each
``uncertain`` call with the resolution that holds (``ran``/``not_run`` by the reconciler or an
operator, ``unknown`` when the reconciler gave up, ``-`` when nothing resolved it yet).
``resolve REQUEST_ID --ran|--not-run --note …`` sends a resolve command signed with the operator's
key (as ``tools publish`` signs a descriptor); the executor verifies it, refuses a call that is not
``uncertain`` or is already resolved, and publishes the resolution (the budgets settle from it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.markup import escape

from effectgate.cli.client import rpc
from effectgate.cli.client.identity import state_dir
from effectgate.cli.client.session import NatsUrl, console, err_console, on_bus
from effectgate.cli.render.fitted import Column, FittedTable
from effectgate.cli.render.output import AsJson, print_json
from effectgate.cli.render.views import one_line
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.bus.paging import DEFAULT_PAGE_ITEMS, MAX_PAGE_ITEMS
from effectgate.contracts.integrity.signing import load_private_key, sign_event
from effectgate.contracts.rpc.uncertain import MAX_NOTE_CHARS, ResolveAnswer, ResolveCommand, UncertainCall

__all__ = ["uncertain_app"]

uncertain_app = typer.Typer(
    help="Calls whose effect is unknown (uncertain): list and resolve them.", no_args_is_help=True
)

PageSize = Annotated[int, typer.Option(min=1, max=MAX_PAGE_ITEMS, help="Calls asked for per page.")]
After = Annotated[str | None, typer.Option(help="Start after this cursor (the `next` a page printed).")]
OnePage = Annotated[bool, typer.Option(help="Print one page and the cursor of the next, instead of every page.")]
Principal = Annotated[
    str | None,
    typer.Option("--principal", help="The call's principal (default: found in `uncertain list` by the request id)."),
]
Ran = Annotated[bool, typer.Option("--ran/--not-run", help="Did the uncertain call's effect happen?")]
Note = Annotated[str, typer.Option(help=f"Why: what was checked (recorded; at most {MAX_NOTE_CHARS} characters).")]
OperatorKey = Annotated[
    Path | None,
    typer.Option(
        "--key",
        envvar="EFFECTGATE_OPERATOR_KEY",
        help="The operator's private key (default <state dir>/keys/operator/operator.key).",
    ),
]

COLUMNS = (
    *(Column(name) for name in ("request", "principal", "tool/operation")),
    *(Column(name, False) for name in ("uncertain since", "resolution", "by")),
)


@uncertain_app.command("list")
def uncertain_list(
    as_json: AsJson = False,
    page_size: PageSize = DEFAULT_PAGE_ITEMS,
    after: After = None,
    one_page: OnePage = False,
    nats_url: NatsUrl = "",
) -> None:
    """Show the uncertain calls, oldest first, with what became of each."""
    query = {"limit": page_size, "after": after}
    found = on_bus(nats_url, lambda bus: rpc.pages(bus, Rpc.UNCERTAIN_LIST, query, "calls", one_page))
    if not found.ok:
        code, reason = escape(str(found.refusal.get("reason_code"))), escape(str(found.refusal.get("reason")))
        err_console.print(f"[red]{code}[/red]:", reason)
        raise typer.Exit(1)
    if as_json:
        print_json(found.items)
    else:
        console.print(_table(found.items) if found.items else "no uncertain call")
    if found.next is not None:
        err_console.print(f"more: effectgate uncertain list --after {escape(found.next)}")


def _table(items: list[Any]) -> FittedTable:
    table = FittedTable("uncertain calls", COLUMNS)
    for item in items:
        call = msgspec.convert(item, UncertainCall)
        since = call.uncertain_at.strftime("%Y-%m-%d %H:%M:%S")
        target = f"{call.tool or '?'}@{call.version or '?'}/{call.operation or '?'}"
        cells = (call.request_id, call.principal, target, since, call.resolution or "-", call.resolved_by or "-")
        table.add_row(*map(one_line, cells))
    return table


@uncertain_app.command("resolve")
def uncertain_resolve(
    request_id: str,
    ran: Ran,
    principal: Principal = None,
    note: Note = "",
    key: OperatorKey = None,
    nats_url: NatsUrl = "",
) -> None:
    """Say what became of the uncertain call REQUEST_ID: --ran or --not-run (signed with the operator key)."""
    key = key or state_dir() / "keys" / "operator" / "operator.key"
    principal = principal or on_bus(nats_url, lambda bus: _principal_of(bus, request_id))
    try:
        command = ResolveCommand(
            request_id=request_id, principal=principal, resolution="ran" if ran else "not_run", note=note
        )
        signed = sign_event(command, load_private_key(key))
    except (OSError, ValueError) as error:
        err_console.print("[red]error:[/red]", escape(str(error)))
        raise typer.Exit(2) from None
    reply = on_bus(nats_url, lambda bus: rpc.ask(bus, Rpc.UNCERTAIN_RESOLVE, signed, ResolveAnswer))
    if not reply.ok:
        err_console.print(f"[red]{escape(reply.reason_code)}[/red]:", escape(reply.reason))
        raise typer.Exit(1)
    console.print(f"[green]{escape(reply.reason)}[/green] ({escape(reply.resolution_id or '')})")


async def _principal_of(bus: rpc.Bus, request_id: str) -> str:
    """The principal of the one uncertain call ``request_id`` names; exits 1 when none or several do."""
    found = await rpc.pages(bus, Rpc.UNCERTAIN_LIST, {"limit": MAX_PAGE_ITEMS}, "calls")
    principals = sorted({item.get("principal") for item in found.items if item.get("request_id") == request_id})
    if len(principals) == 1 and isinstance(principals[0], str):
        return principals[0]
    why = "no uncertain call has" if not principals else f"calls of {', '.join(map(str, principals))} have"
    err_console.print(f"[red]not resolved:[/red] {escape(why)} request id {escape(request_id)}; name --principal")
    raise typer.Exit(1)
