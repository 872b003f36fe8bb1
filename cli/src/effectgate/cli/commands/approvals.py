"""``effectgate approvals …``: list pending approvals in pages, show one whole, answer them.

``list`` asks ``tg.approvals.list`` page after page (each page fits one NATS message) and
prints them all, unless ``--one-page`` (then the command says how to ask for the next);
``--summary`` leaves large arguments out (``approvals show ID`` prints them).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from effectgate.cli.client import rpc
from effectgate.cli.client.session import NatsUrl, console, err_console, on_bus
from effectgate.cli.render.approvals import approvals_blocks
from effectgate.cli.render.output import AsJson, print_json
from effectgate.cli.render.views import decide_line
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.bus.paging import DEFAULT_PAGE_ITEMS, MAX_PAGE_ITEMS
from effectgate.contracts.rpc.approvals import APPROVAL_NOT_OPEN

__all__ = ["approvals_app"]

approvals_app = typer.Typer(help="Answer pending approvals.", no_args_is_help=True)

Approver = Annotated[
    str, typer.Option("--as", envvar="EFFECTGATE_APPROVER", help="Approver identity (env EFFECTGATE_APPROVER).")
]
Note = Annotated[str, typer.Option(help="A remark recorded with the answer (audit trail, receipt reason).")]
Wait = Annotated[
    float, typer.Option(min=0, help="Seconds to keep answering an approval not open yet (its request is decided).")
]
Summary = Annotated[bool, typer.Option(help="Leave large arguments out (`effectgate approvals show ID` prints them).")]
PageSize = Annotated[int, typer.Option(min=1, max=MAX_PAGE_ITEMS, help="Approvals asked for per page.")]
After = Annotated[str | None, typer.Option(help="Start after this cursor (the `next` a page printed).")]
OnePage = Annotated[bool, typer.Option(help="Print one page and the cursor of the next, instead of every page.")]


def _refused(answer: dict[str, Any]) -> typer.Exit:
    code, reason = escape(str(answer.get("reason_code"))), escape(str(answer.get("reason")))
    err_console.print(f"[red]{code}[/red]:", reason)
    return typer.Exit(1)


@approvals_app.command("list")
def approvals_list(
    as_json: AsJson = False,
    summary: Summary = False,
    page_size: PageSize = DEFAULT_PAGE_ITEMS,
    after: After = None,
    one_page: OnePage = False,
    nats_url: NatsUrl = "",
) -> None:
    """Show pending approvals, one block each: exactly what it would let run, and who answers."""
    query = {"summary": summary, "limit": page_size, "after": after}
    found = on_bus(nats_url, lambda bus: rpc.pages(bus, Rpc.APPROVALS_LIST, query, "approvals", one_page))
    if not found.ok:
        raise _refused(found.refusal)
    if as_json:
        print_json(found.items)
    else:
        console.print(approvals_blocks(found.items) if found.items else "no pending approvals")
    if found.next is not None:
        err_console.print(f"more: effectgate approvals list --after {escape(found.next)}")


@approvals_app.command("show")
def approvals_show(approval_id: str, as_json: AsJson = False, nats_url: NatsUrl = "") -> None:
    """Show one approval whole, its arguments in full (the id a joined request had shows the approval it joined)."""
    answer = on_bus(nats_url, lambda bus: rpc.request(bus, Rpc.APPROVALS_SHOW, {"approval_id": approval_id}))
    if not answer.get("ok"):
        raise _refused(answer)
    if as_json:
        print_json(answer["approval"])
        return
    console.print(approvals_blocks([answer["approval"]], title=f"approval {answer['approval']['approval_id']}"))
    if answer.get("reason") != "found":
        err_console.print(escape(str(answer.get("reason"))))


def _decide(approval_id: str, approve: bool, approver: str, note: str, url: str, wait_s: float, withdraw: bool) -> None:
    answer = on_bus(
        url,
        lambda bus: rpc.decide_when_open(bus, approver, approval_id, approve, note, withdraw=withdraw, wait_s=wait_s),
        approver,
    )
    if answer.get("reason_code") == APPROVAL_NOT_OPEN:
        err_console.print(f"[yellow]not open yet[/yellow] after {wait_s:g} s:", escape(str(answer.get("reason"))))
        raise typer.Exit(1)
    if not answer.get("ok"):
        raise _refused(answer)
    console.print(decide_line(answer))


@approvals_app.command("approve")
def approvals_approve(
    approval_id: str, approver: Approver, note: Note = "", wait: Wait = 10.0, nats_url: NatsUrl = ""
) -> None:
    """Vote for one pending approval: granted (single use, bound to the exact arguments) once its quorum is met."""
    _decide(approval_id, True, approver, note, nats_url, wait, withdraw=False)


@approvals_app.command("reject")
def approvals_reject(
    approval_id: str, approver: Approver, note: Note = "", wait: Wait = 10.0, nats_url: NatsUrl = ""
) -> None:
    """Reject one pending approval: the request ends denied."""
    _decide(approval_id, False, approver, note, nats_url, wait, withdraw=False)


@approvals_app.command("withdraw")
def approvals_withdraw(approval_id: str, approver: Approver, wait: Wait = 10.0, nats_url: NatsUrl = "") -> None:
    """Take back your vote on an approval that is still pending."""
    _decide(approval_id, False, approver, "", nats_url, wait, withdraw=True)
