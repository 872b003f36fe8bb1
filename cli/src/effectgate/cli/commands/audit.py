"""``effectgate audit …``: a request's trail, the chain's verification (online and offline), export, alarms."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from nats.aio.client import Client
from rich.markup import escape

from effectgate.cli.client import rpc
from effectgate.cli.client.session import NatsUrl, console, err_console, on_bus
from effectgate.cli.render.audit_report import problems, signature_problems
from effectgate.cli.render.output import AsJson, print_json
from effectgate.cli.render.views import alarm_row, alarms_table, trail_table
from effectgate.contracts.bus.catalog import Rpc, Subjects

__all__ = ["audit_app"]

audit_app = typer.Typer(help="Read and verify the audit chain.", no_args_is_help=True)


@audit_app.command("trail")
def audit_trail(request_id: str, as_json: AsJson = False, nats_url: NatsUrl = "") -> None:
    """Print every audit record of one request, in the order the bus carried them (--json: whole)."""
    reply = on_bus(nats_url, lambda bus: rpc.request(bus, Rpc.AUDIT_TRAIL, {"request_id": request_id}))
    if as_json and reply.get("records"):
        print_json(reply["records"])
        return
    if not reply.get("records"):
        hint = (
            " (that is an approval id: `approvals list` shows its request id)" if request_id.startswith("ap-") else ""
        )
        err_console.print(escape(f"no audit records for request {request_id!r}{hint}"))
        raise typer.Exit(1)
    console.print(trail_table(request_id, reply["records"]))


@audit_app.command("verify")
def audit_verify(
    nats_url: NatsUrl = "",
    file: Annotated[Path | None, typer.Option(help="Verify an exported chain (audit export) offline.")] = None,
    keys: Annotated[
        Path | None, typer.Option(help="Public keys for --file (effectgate up: .effectgate/keys/public).")
    ] = None,
) -> None:
    """Check the whole hash chain and every signature; name the first broken record.

    With --file and --keys it needs no bus: an exported chain is verified with the public keys alone.
    """
    if file is not None:
        _verify_offline(file, keys)
        return
    reply = on_bus(nats_url, lambda bus: rpc.request(bus, Rpc.AUDIT_VERIFY, {}, timeout_s=120))
    _fail_on(problems(reply))
    result = reply["result"]
    console.print(f"[green]audit chain intact[/green]: {result['checked']} of {reply['total']} records verified")
    if unanchored := reply.get("unanchored"):
        console.print(f"{unanchored} record(s) no longer in the stream (expired): checked by hash only")
    behind = (reply.get("stream_last_seq") or 0) - (reply.get("audited_last_seq") or 0)
    if behind > 0:
        console.print(f"audit is {behind} event(s) behind the stream (still consuming)")


def _verify_offline(file: Path, keys: Path | None) -> None:
    from effectgate.cli.commands.audit_file import ExportInvalid, verify_file

    if keys is None:
        err_console.print(
            "[red]error:[/red] --file needs --keys (the directory of policy.pub, approvals.pub, receipts.pub)"
        )
        raise typer.Exit(2)
    try:
        found = verify_file(file, keys)
    except (ExportInvalid, OSError, ValueError) as error:
        err_console.print("[red]error:[/red]", escape(str(error)))
        raise typer.Exit(2) from None
    if not found.result.ok:
        err_console.print(
            f"[red]audit chain broken at record {found.result.first_broken}[/red]:", escape(found.result.reason)
        )
        raise typer.Exit(1)
    _fail_on(signature_problems(msgspec.to_builtins(found.bad_signatures), found.bad_signature_count))
    console.print(f"[green]audit chain intact[/green]: {found.result.checked} records and their signatures verified")


def _fail_on(found: list[str]) -> None:
    for line in found:
        err_console.print(line)
    if found:
        raise typer.Exit(1)


@audit_app.command("export")
def audit_export(file: Path, nats_url: NatsUrl = "") -> None:
    """Write the whole chain to FILE (JSON Lines), for `audit verify --file FILE --keys DIR` anywhere."""
    from effectgate.cli.commands.audit_file import ExportInvalid, export_chain

    async def work(bus: rpc.Bus) -> int:
        async def page(after: int, limit: int) -> dict[str, Any]:
            reply: dict[str, Any] = await rpc.request(
                bus, Rpc.AUDIT_EXPORT, {"after": after, "limit": limit}, timeout_s=30
            )
            return reply

        with file.open("wb") as sink:
            return await export_chain(page, sink)

    try:
        written = on_bus(nats_url, work)
    except ExportInvalid as error:
        err_console.print("[red]error:[/red]", escape(str(error)))
        raise typer.Exit(1) from None
    console.print(f"{written} records written to {file}")


Limit = Annotated[int, typer.Option(help="How many of the most recent security events to list (1-500).")]
Follow = Annotated[bool, typer.Option("--follow", help="Keep printing new alarms as they are raised, until Ctrl-C.")]


@audit_app.command("alarms")
def audit_alarms(limit: Limit = 20, follow: Follow = False, as_json: AsJson = False, nats_url: NatsUrl = "") -> None:
    """List recent security events (refused approvals, forgeries, permission violations); --follow for new ones."""
    if as_json and follow:
        err_console.print("[red]error:[/red] --json lists the recorded alarms once; it does not --follow")
        raise typer.Exit(2)
    if as_json:
        reply = on_bus(nats_url, lambda bus: _listed_alarms(bus, limit))
        print_json(reply["alarms"])
        return
    try:
        on_bus(nats_url, lambda bus: _alarms(bus, limit, follow))
    except KeyboardInterrupt:
        console.print("stopped following alarms")


async def _alarms(bus: rpc.Bus, limit: int, follow: bool) -> None:
    nc, queue = bus.nc, asyncio.Queue[bytes]()

    async def on_alarm(msg: Any) -> None:
        queue.put_nowait(msg.data)

    if follow:  # subscribed before listing: nothing raised in between is missed
        await nc.subscribe(Subjects.ALARMS, cb=on_alarm)
        await nc.flush()
    reply = await _listed_alarms(bus, limit)
    table, shown = alarms_table(), {alarm["sequence"] for alarm in reply["alarms"]}
    for alarm in reply["alarms"]:
        alarm_row(table, alarm)
    console.print(table if shown else "no security events recorded")
    if follow:
        console.print("following new alarms (Ctrl-C to stop)")
        await _follow(nc, queue, shown)


async def _listed_alarms(bus: rpc.Bus, limit: int) -> dict[str, Any]:
    """The ``tg.audit.alarms`` answer.

    Raises:
        rpc.BusError: the audit refused (the reason says why) or did not answer.
    """
    reply: dict[str, Any] = await rpc.request(bus, Rpc.AUDIT_ALARMS, {"limit": limit})
    if not reply.get("ok"):
        raise rpc.BusError(str(reply.get("reason")))
    return reply


async def _follow(nc: Client, queue: asyncio.Queue[bytes], shown: set[int]) -> None:
    """Print each new alarm; a lost connection ends the command with an error."""
    while True:
        try:
            alarm = msgspec.json.decode(await asyncio.wait_for(queue.get(), timeout=1.0))
        except TimeoutError:
            if nc.is_closed or not nc.is_connected:
                raise rpc.BusError("the connection to NATS was lost; no more alarms") from None
            continue
        except msgspec.DecodeError:
            continue
        if not isinstance(alarm, dict) or alarm.get("sequence") in shown:
            continue
        shown.add(alarm["sequence"])
        table = alarms_table(title="")
        alarm_row(table, alarm)
        console.print(table)
