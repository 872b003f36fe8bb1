"""``python -m siem_forwarder``: forward the audit record to a JSON lines file a SIEM ingests."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import nats
import typer
from nats.js.errors import NotFoundError

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.nats_credentials import load_credentials
from siem_forwarder.forwarder import forward, load_keys
from siem_forwarder.output import Output

app = typer.Typer(add_completion=False, help=__doc__)


async def _run(url: str, credentials: Path, keys_dir: Path, out: Path, idle_exit_s: float | None) -> int:
    keys, output = load_keys(keys_dir), Output(out)
    nc = await nats.connect(servers=url, allow_reconnect=True, **load_credentials(credentials))
    try:
        return await forward(nc.jetstream(prefix=catalog.AUDITOR_JS_API), output, keys, idle_exit_s)
    finally:
        await nc.close()
        output.close()


@app.command()
def main(
    out: Annotated[Path, typer.Option(help="The JSON lines file (appended to; resumed from its last line).")],
    credentials: Annotated[Path, typer.Option(help="The auditor's credentials file (effectgate up: credentials/).")],
    public_keys: Annotated[Path, typer.Option(help="The public keys directory (effectgate keys: public/).")],
    nats_url: Annotated[str, typer.Option(envvar="NATS_URL", help="The bus.")] = "nats://127.0.0.1:4222",
    idle_exit: Annotated[float | None, typer.Option(help="Stop after this many seconds without a record.")] = None,
) -> None:
    """Pull the auditor's consumer, verify each record's signature, write one line per record, then ack it."""
    try:
        handled = asyncio.run(_run(nats_url, credentials, public_keys, out, idle_exit))
    except NotFoundError:
        durable = catalog.AUDITOR_CONSUMER.durable
        typer.echo(f"no consumer {durable} on {catalog.STREAM}: not provisioned, or nats-server before 2.10", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{handled} records handled; {out} ends at stream sequence {Output(out).last}")


if __name__ == "__main__":
    app()
