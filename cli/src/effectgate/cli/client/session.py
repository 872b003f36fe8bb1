"""The CLI's connection to a running stack: who it is, where the bus is, and errors as one line.

Every command that talks to the services runs its work through :func:`on_bus`: it connects
as the command's identity (:mod:`effectgate.cli.client.identity`), to ``NATS_URL`` or the URL
``effectgate up`` wrote, and turns any failure into ``error: …`` and exit code 2.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import nats
import typer
from rich.console import Console
from rich.markup import escape

from effectgate.cli.client import rpc
from effectgate.cli.client.identity import identity, state_dir
from effectgate.contracts.bus.nats_credentials import CredentialsInvalid
from effectgate.contracts.errors import described
from effectgate.shared.runtime.connections import CA_FILE_ENV, NatsUnreachable, redact, tls_options

__all__ = ["NatsUrl", "console", "err_console", "on_bus", "on_bus_if_up", "stack_url"]

T = TypeVar("T")
console = Console()
err_console = Console(stderr=True)

NatsUrl = Annotated[
    str,
    typer.Option(
        envvar="NATS_URL",
        help="NATS server, or a comma-separated list tried in order; `effectgate up` writes .effectgate/nats_url.",
    ),
]


def stack_url(url: str | None) -> str:
    """``url`` when given, else the URL ``effectgate up`` wrote in the state dir.

    Raises:
        rpc.BusError: neither (the message says how to start a stack).
    """
    if url:
        return url
    saved = state_dir() / "nats_url"
    if not saved.exists():  # never offer credentials to whatever listens on a default port
        raise rpc.BusError(f"no NATS_URL and no {saved}: is `effectgate up` running (from this directory)?")
    return saved.read_text().strip()


async def _connect(url: str | None, approver: str | None) -> rpc.Bus:
    """Connect as the command's identity (first: who), to the stack's bus (then: where)."""
    who = identity(approver)
    try:
        return await rpc.Bus.connect(
            stack_url(url), who.user, **who.options, **tls_options(os.environ.get(CA_FILE_ENV))
        )
    except NatsUnreachable as error:
        stale = " (is `./dev up` running? .effectgate/nats_url may be stale)" if not os.environ.get("NATS_URL") else ""
        raise rpc.BusError(f"{error}; connecting as {who.user or 'no user'} ({who.source}){stale}") from None


def _run(url: str | None, work: Callable[[rpc.Bus], Awaitable[T]], approver: str | None) -> T:
    async def run() -> T:
        bus = await _connect(url, approver)
        try:
            return await work(bus)
        finally:
            await bus.close()

    return asyncio.run(run())


_FAILURES = (rpc.BusError, CredentialsInvalid, ValueError, OSError, nats.errors.Error)


def on_bus(url: str | None, work: Callable[[rpc.Bus], Awaitable[T]], approver: str | None = None) -> T:
    """Run ``work`` on a connection as the operator, or as ``approver`` (see :mod:`effectgate.cli.client.identity`)."""
    try:
        return _run(url, work, approver)
    except _FAILURES as error:
        err_console.print("[red]error:[/red]", escape(redact(described(error))))
        raise typer.Exit(2) from None


def on_bus_if_up(url: str | None, work: Callable[[rpc.Bus], Awaitable[T]]) -> tuple[T | None, str]:
    """``on_bus`` for work that can do without a stack: ``(result, "")``, or ``(None, why not)``."""
    try:
        return _run(url, work, None), ""
    except _FAILURES as error:
        return None, redact(described(error))
