"""The ``toolgate`` command (typer + rich). Each command is a thin shell over a module."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
import nats
import typer
from nats.aio.client import Client
from rich.console import Console
from rich.markup import escape

from toolgate.cli import rpc
from toolgate.cli.audit_report import problems, signature_problems
from toolgate.cli.identity import identity, state_dir
from toolgate.cli.render import alarm_row, alarms_table, approvals_table, tools_table, trail_table
from toolgate.shared.catalog import Rpc, Subjects
from toolgate.shared.connections import CA_FILE_ENV, NatsUnreachable, redact, tls_options
from toolgate.shared.descriptors import ToolDescriptor
from toolgate.shared.directory import DirectoryInvalid
from toolgate.shared.keyring import HOLDERS, PUBLIC, lay_out_keys
from toolgate.shared.nats_credentials import CredentialsInvalid

__all__ = ["main"]

T = TypeVar("T")
app = typer.Typer(help="toolgate: a governed gateway between AI agents and their tools.", no_args_is_help=True)
tools_app = typer.Typer(help="The tool registry.", no_args_is_help=True)
approvals_app = typer.Typer(help="Answer pending approvals.", no_args_is_help=True)
audit_app = typer.Typer(help="Read and verify the audit chain.", no_args_is_help=True)
keys_app = typer.Typer(help="Signing keys: one directory per holder, its own private key only.", no_args_is_help=True)
tls_app = typer.Typer(help="TLS certificates of the NATS server.", no_args_is_help=True)
for sub, name in (
    (tools_app, "tools"),
    (approvals_app, "approvals"),
    (audit_app, "audit"),
    (keys_app, "keys"),
    (tls_app, "tls"),
):
    app.add_typer(sub, name=name)
console = Console()
err_console = Console(stderr=True)

NatsUrl = Annotated[str, typer.Option(envvar="NATS_URL", help="NATS server; `toolgate up` writes .toolgate/nats_url.")]


def _url(url: str | None) -> str:
    if url:
        return url
    saved = state_dir() / "nats_url"
    if not saved.exists():  # never offer credentials to whatever listens on a default port
        raise rpc.BusError(f"no NATS_URL and no {saved}: is `toolgate up` running (from this directory)?")
    return saved.read_text().strip()


async def _connect(url: str | None, approver: str | None) -> rpc.Bus:
    """Connect as the command's identity (first: who), to the stack's bus (then: where)."""
    who = identity(approver)
    try:
        return await rpc.Bus.connect(_url(url), who.user, **who.options, **tls_options(os.environ.get(CA_FILE_ENV)))
    except NatsUnreachable as error:
        stale = " (is `./dev up` running? .toolgate/nats_url may be stale)" if not os.environ.get("NATS_URL") else ""
        raise rpc.BusError(f"{error}; connecting as {who.user or 'no user'} ({who.source}){stale}") from None


def _on_bus(url: str | None, work: Callable[[rpc.Bus], Awaitable[T]], approver: str | None = None) -> T:
    """Run ``work`` on a connection as the operator, or as ``approver`` (see :mod:`toolgate.cli.identity`)."""

    async def run() -> T:
        bus = await _connect(url, approver)
        try:
            return await work(bus)
        finally:
            await bus.close()

    try:
        return asyncio.run(run())
    except (rpc.BusError, CredentialsInvalid, ValueError, OSError, nats.errors.Error) as error:
        err_console.print("[red]error:[/red]", escape(redact(str(error))))
        raise typer.Exit(2) from None


@tools_app.command("list")
def tools_list(nats_url: NatsUrl = "") -> None:
    """List every tool's latest version, one row per operation."""
    reply: dict[str, Any] = _on_bus(nats_url, lambda bus: rpc.request(bus, Rpc.REGISTRY_LIST, {}))
    console.print(tools_table(msgspec.convert(reply.get("descriptors") or [], list[ToolDescriptor])))


OperatorKey = Annotated[
    Path | None,
    typer.Option(
        "--key",
        envvar="TOOLGATE_OPERATOR_KEY",
        help="The operator's private key (default <state dir>/keys/operator/operator.key).",
    ),
]


@tools_app.command("publish")
def tools_publish(file: Path, key: OperatorKey = None, nats_url: NatsUrl = "") -> None:
    """Publish the tool descriptor in FILE, signed with the operator's key (versions are immutable)."""
    from toolgate.shared.signing import load_private_key, sign_value

    key = key or state_dir() / "keys" / "operator" / "operator.key"
    try:
        descriptor = msgspec.json.decode(file.read_bytes())
        body = {"descriptor": descriptor, "signature": sign_value(descriptor, load_private_key(key))}
    except (OSError, ValueError, msgspec.DecodeError) as error:
        err_console.print("[red]error:[/red]", escape(str(error)))
        raise typer.Exit(2) from None
    reply: dict[str, Any] = _on_bus(nats_url, lambda bus: rpc.request(bus, Rpc.REGISTRY_PUBLISH, body))
    code, reason = escape(str(reply.get("reason_code"))), escape(str(reply.get("reason")))
    if not reply.get("ok"):
        err_console.print(f"[red]{code}[/red]:", reason)
        raise typer.Exit(1)
    console.print(f"[green]{code}[/green]:", reason)


@approvals_app.command("list")
def approvals_list(nats_url: NatsUrl = "") -> None:
    """Show pending approvals and exactly what each would let run."""
    pending = _on_bus(nats_url, lambda bus: rpc.request(bus, Rpc.APPROVALS_LIST, {}))
    if isinstance(pending, dict):
        err_console.print(f"[red]{escape(str(pending.get('reason_code')))}[/red]:", escape(str(pending.get("reason"))))
        raise typer.Exit(1)
    console.print(approvals_table(pending) if pending else "no pending approvals")


Approver = Annotated[
    str, typer.Option("--as", envvar="TOOLGATE_APPROVER", help="Approver identity (env TOOLGATE_APPROVER).")
]


def _decide(approval_id: str, approve: bool, approver: str, note: str, url: str) -> None:
    answer = _on_bus(url, lambda bus: rpc.decide(bus, approver, approval_id, approve, note), approver)
    if not answer.get("ok"):
        err_console.print(f"[red]{escape(str(answer.get('reason_code')))}[/red]:", escape(str(answer.get("reason"))))
        raise typer.Exit(1)
    console.print(f"[green]{escape(str(answer.get('reason_code')))}[/green]:", escape(str(answer.get("reason"))))


Note = Annotated[str, typer.Option(help="A remark recorded with the answer (audit trail, receipt reason).")]


@approvals_app.command("approve")
def approvals_approve(approval_id: str, approver: Approver, note: Note = "", nats_url: NatsUrl = "") -> None:
    """Grant one pending approval (single use, bound to the exact arguments)."""
    _decide(approval_id, True, approver, note, nats_url)


@approvals_app.command("reject")
def approvals_reject(approval_id: str, approver: Approver, note: Note = "", nats_url: NatsUrl = "") -> None:
    """Reject one pending approval: the request ends denied."""
    _decide(approval_id, False, approver, note, nats_url)


@audit_app.command("trail")
def audit_trail(request_id: str, nats_url: NatsUrl = "") -> None:
    """Print every audit record of one request, in the order the bus carried them."""
    reply = _on_bus(nats_url, lambda bus: rpc.request(bus, Rpc.AUDIT_TRAIL, {"request_id": request_id}))
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
        Path | None, typer.Option(help="Public keys for --file (toolgate up: .toolgate/keys/public).")
    ] = None,
) -> None:
    """Check the whole hash chain and every signature; name the first broken record.

    With --file and --keys it needs no bus: an exported chain is verified with the public keys alone.
    """
    if file is not None:
        _verify_offline(file, keys)
        return
    reply = _on_bus(nats_url, lambda bus: rpc.request(bus, Rpc.AUDIT_VERIFY, {}, timeout_s=120))
    _fail_on(problems(reply))
    result = reply["result"]
    console.print(f"[green]audit chain intact[/green]: {result['checked']} of {reply['total']} records verified")
    if unanchored := reply.get("unanchored"):
        console.print(f"{unanchored} record(s) no longer in the stream (expired): checked by hash only")
    behind = (reply.get("stream_last_seq") or 0) - (reply.get("audited_last_seq") or 0)
    if behind > 0:
        console.print(f"audit is {behind} event(s) behind the stream (still consuming)")


def _verify_offline(file: Path, keys: Path | None) -> None:
    from toolgate.cli.audit_file import ExportInvalid, verify_file

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
    from toolgate.cli.audit_file import ExportInvalid, export_chain

    async def work(bus: rpc.Bus) -> int:
        async def page(after: int, limit: int) -> dict[str, Any]:
            reply: dict[str, Any] = await rpc.request(
                bus, Rpc.AUDIT_EXPORT, {"after": after, "limit": limit}, timeout_s=30
            )
            return reply

        with file.open("wb") as sink:
            return await export_chain(page, sink)

    try:
        written = _on_bus(nats_url, work)
    except ExportInvalid as error:
        err_console.print("[red]error:[/red]", escape(str(error)))
        raise typer.Exit(1) from None
    console.print(f"{written} records written to {file}")


Limit = Annotated[int, typer.Option(help="How many of the most recent security events to list (1-500).")]
Follow = Annotated[bool, typer.Option("--follow", help="Keep printing new alarms as they are raised, until Ctrl-C.")]


@audit_app.command("alarms")
def audit_alarms(limit: Limit = 20, follow: Follow = False, nats_url: NatsUrl = "") -> None:
    """List recent security events (refused approvals, forgeries, permission violations); --follow for new ones."""
    try:
        _on_bus(nats_url, lambda bus: _alarms(bus, limit, follow))
    except KeyboardInterrupt:
        console.print("stopped following alarms")


async def _alarms(bus: rpc.Bus, limit: int, follow: bool) -> None:
    nc, queue = bus.nc, asyncio.Queue[bytes]()

    async def on_alarm(msg: Any) -> None:
        queue.put_nowait(msg.data)

    if follow:  # subscribed before listing: nothing raised in between is missed
        await nc.subscribe(Subjects.ALARMS, cb=on_alarm)
        await nc.flush()
    reply = await rpc.request(bus, Rpc.AUDIT_ALARMS, {"limit": limit})
    if not reply.get("ok"):
        raise rpc.BusError(str(reply.get("reason")))
    table, shown = alarms_table(), {alarm["sequence"] for alarm in reply["alarms"]}
    for alarm in reply["alarms"]:
        alarm_row(table, alarm)
    console.print(table if shown else "no security events recorded")
    if follow:
        console.print("following new alarms (Ctrl-C to stop)")
        await _follow(nc, queue, shown)


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


@keys_app.command("generate")
def keys_generate(directory: Path) -> None:
    """Lay out every signing key and the sealing key under DIRECTORY, one directory per holder (keeping existing keys).

    DIRECTORY/<service> is what that service mounts as TOOLGATE_KEYS_DIR; DIRECTORY/public
    holds every public key (agents, offline audit verification); DIRECTORY/operator is the
    operator's own.
    """
    lay_out_keys(directory)
    console.print(f"keys in {directory}: " + ", ".join(sorted(HOLDERS)) + f", {PUBLIC}")


Hosts = Annotated[
    list[str], typer.Option("--host", help="A name or IP clients dial (repeat); the first is the subject.")
]
CaDir = Annotated[Path | None, typer.Option(help="Also write ca.pem alone here, for the clients to mount.")]


@tls_app.command("generate")
def tls_generate(directory: Path, host: Hosts, ca_dir: CaDir = None) -> None:
    """Write a CA (ca.pem), a server certificate (server.pem) and its key (server.key, 0600) into DIRECTORY.

    The CA's private key is discarded once it signed; existing files are kept.
    """
    from toolgate.cli.tls import generate_tls

    try:
        written = generate_tls(directory, host, ca_dir)
    except (ValueError, OSError) as error:
        err_console.print("[red]error:[/red]", escape(str(error)))
        raise typer.Exit(2) from None
    console.print(f"{'certificates written to' if written else 'certificates kept in'} {directory}")


Principals = Annotated[Path, typer.Option(help="Principal directory TOML: its agents (principals) and approvers.")]
Placeholders = Annotated[
    bool, typer.Option(help="Passwords as $NATS_<USER>_PASSWORD, read when nats-server starts (a committed file).")
]
EnvLines = Annotated[bool, typer.Option("--env", help="Print fresh NATS_<USER>_PASSWORD=… lines (a .env) instead.")]
Admin = Annotated[bool, typer.Option(help="Add the user `admin` with every right (a test observer; never production).")]


@app.command("nats-config")
def nats_config(
    principals: Principals, placeholders: Placeholders = False, env: EnvLines = False, admin: Admin = False
) -> None:
    """Print the nats-server config: a user per service, agent and approver, with its permissions.

    Without --placeholders, fresh passwords are written into the config: keep it private.
    """
    from toolgate.cli.credentials import config_text, env_lines
    from toolgate.shared.directory import load_directory

    try:
        directory = load_directory(principals)
        if env:
            text = env_lines(directory, admin=admin)
        else:
            text = config_text(directory, placeholders=placeholders, admin=admin)
    except (DirectoryInvalid, ValueError) as error:
        err_console.print("[red]error:[/red]", escape(str(error)))
        raise typer.Exit(2) from None
    typer.echo(text, nl=False)


Insecure = Annotated[
    bool,
    typer.Option(
        "--insecure", help="Run NATS without users or permissions (anyone may do anything): loud, never default."
    ),
]
StateDir = Annotated[
    Path | None,
    typer.Option("--state-dir", help="Keys, logs, data, credentials (env TOOLGATE_STATE_DIR, default .toolgate)."),
]


@app.command()
def up(state: StateDir = None, insecure: Insecure = False) -> None:
    """Run NATS (secured), Redis and the five services until Ctrl-C; print how agents connect."""
    from toolgate.cli.up import run_up

    raise typer.Exit(run_up(console, err_console, (state or state_dir()).resolve(), insecure))


@app.command()
def demo(insecure: Insecure = False) -> None:
    """Run the scripted demo on real files, a real git repository, NATS (secured) and Redis."""
    from toolgate.cli.announce import insecure_banner
    from toolgate.cli.demo import run_demo

    if insecure:
        insecure_banner(console)
    raise typer.Exit(run_demo(console, insecure))


@app.command()
def bench(calls: int = 300, concurrency: int = 8, insecure: Insecure = False) -> None:
    """Governed-call latency and throughput as ratios to a bare NATS request/reply (NATS secured)."""
    from toolgate.cli.announce import insecure_banner
    from toolgate.cli.bench import run_bench

    if insecure:
        insecure_banner(console)
    raise typer.Exit(run_bench(console, calls, concurrency, insecure))


def main() -> None:
    """Entry point of the ``toolgate`` command."""
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    app()
