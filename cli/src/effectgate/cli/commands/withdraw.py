"""``effectgate withdraw``: an agent withdraws its own call while its approval is pending.

The command connects as the agent ``--as`` names, as ``effectgate call`` does, and asks on
``tg.approvals.withdraw.<principal>`` (the SDK's ``ToolClient.withdraw``).
"""

from __future__ import annotations

import asyncio

import nats
import typer
from rich.markup import escape

from effectgate.cli.client.rpc import BusError
from effectgate.cli.client.session import NatsUrl, console, err_console, stack_url
from effectgate.cli.commands.call import CallRefused, Principal, agent_options
from effectgate.cli.render.output import AsJson, print_json
from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.bus.nats_credentials import CredentialsInvalid
from effectgate.contracts.rpc.approvals import WithdrawReply
from effectgate.sdk import ToolClient
from effectgate.sdk.receipts import ReceiptKeyMissing
from effectgate.shared.runtime.connections import NatsUnreachable, redact

__all__ = ["withdraw"]

_FAILURES = (
    *(CallRefused, BusError, NatsUnreachable, CredentialsInvalid, PermissionError, ValueError, OSError),
    *(ReceiptKeyMissing, nats.errors.Error),
)


async def _withdraw(url: str, principal: str, request_id: str) -> WithdrawReply:
    client = await ToolClient.connect(url, principal, **agent_options(principal))
    try:
        return await client.withdraw(request_id)
    finally:
        await client.close()


def withdraw(
    request_id: str, principal: Principal = "demo-agent", as_json: AsJson = False, nats_url: NatsUrl = ""
) -> None:
    """Withdraw REQUEST_ID, a call of the agent --as names still waiting for its approval."""
    try:
        if not TOKEN.match(principal):
            raise CallRefused(f"--as {principal!r} must match {TOKEN.pattern}")
        reply = asyncio.run(_withdraw(stack_url(nats_url), principal, request_id))
    except _FAILURES as error:
        err_console.print("[red]error:[/red]", escape(redact(str(error))))
        raise typer.Exit(2) from None
    if as_json:
        print_json(reply)
    elif reply.ok:
        console.print(f"[bold]withdrawn[/bold] {escape(reply.reason)}", soft_wrap=True)
    else:
        err_console.print(f"[yellow]{escape(reply.reason_code)}[/yellow]: {escape(reply.reason)}", soft_wrap=True)
    raise typer.Exit(0 if reply.ok else 1)
