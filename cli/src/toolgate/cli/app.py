"""The ``toolgate`` command (typer + rich). Each command is a thin shell over a module."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.markup import escape

from toolgate.cli import rpc
from toolgate.cli.approvals_commands import approvals_app
from toolgate.cli.audit_commands import audit_app
from toolgate.cli.budget_commands import budgets_app
from toolgate.cli.call_command import call
from toolgate.cli.config_commands import ConfigPath, McpServersPath, config_app, up_env
from toolgate.cli.identity import state_dir
from toolgate.cli.mcp_commands import mcp_app
from toolgate.cli.output import AsJson
from toolgate.cli.policy_commands import policy_app
from toolgate.cli.requests_command import requests_command
from toolgate.cli.session import NatsUrl, console, err_console, on_bus
from toolgate.cli.tools_commands import publish_refusal, tools_describe, tools_list
from toolgate.cli.withdraw_command import withdraw
from toolgate.contracts.catalog import Rpc
from toolgate.contracts.directory import DirectoryInvalid
from toolgate.shared.keyring import HOLDERS, PUBLIC, lay_out_keys
from toolgate.shared.toml_file import absolute

__all__ = ["main"]

app = typer.Typer(help="toolgate: a governed gateway between AI agents and their tools.", no_args_is_help=True)
tools_app = typer.Typer(help="The tool registry.", no_args_is_help=True)
keys_app = typer.Typer(help="Signing keys: one directory per holder, its own private key only.", no_args_is_help=True)
tls_app = typer.Typer(help="TLS certificates of the NATS server.", no_args_is_help=True)
for sub, name in (
    (tools_app, "tools"),
    (approvals_app, "approvals"),
    (audit_app, "audit"),
    (policy_app, "policy"),
    (budgets_app, "budgets"),
    (config_app, "config"),
    (keys_app, "keys"),
    (tls_app, "tls"),
    (mcp_app, "mcp"),
):
    app.add_typer(sub, name=name)
tools_app.command("list")(tools_list)
tools_app.command("describe")(tools_describe)
app.command("call")(call)
app.command("requests")(requests_command)
app.command("withdraw")(withdraw)


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"toolgate {metadata.version('toolgate-cli')}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """toolgate: a governed gateway between AI agents and their tools."""


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
    """Publish the tool descriptor in FILE, signed with the operator's key (versions are immutable).

    A refusal names every mistake of the descriptor, a mistyped key with the key meant; success
    prints the registry's own line (``file_system@1.0.0 published`` or ``… unchanged``).
    """
    from toolgate.contracts.signing import load_private_key, sign_value

    key = key or state_dir() / "keys" / "operator" / "operator.key"
    try:
        descriptor = msgspec.json.decode(file.read_bytes())
        if refusal := publish_refusal(descriptor):
            err_console.print(f"[red]{refusal[0]}[/red]:", escape(f"{file}: {refusal[1]}; nothing was sent"))
            raise typer.Exit(1)
        body = {"descriptor": descriptor, "signature": sign_value(descriptor, load_private_key(key))}
    except (OSError, ValueError, msgspec.DecodeError) as error:
        err_console.print("[red]error:[/red]", escape(str(error)))
        raise typer.Exit(2) from None
    reply: dict[str, Any] = on_bus(nats_url, lambda bus: rpc.request(bus, Rpc.REGISTRY_PUBLISH, body))
    code, reason = escape(str(reply.get("reason_code"))), escape(str(reply.get("reason")))
    if not reply.get("ok"):
        err_console.print(f"[red]{code}[/red]:", reason)
        raise typer.Exit(1)
    console.print(f"[green]{reason}[/green]")


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
    from toolgate.contracts.directory import load_directory

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
def up(
    state: StateDir = None, insecure: Insecure = False, config: ConfigPath = None, mcp_servers: McpServersPath = None
) -> None:
    """Run NATS (secured), Redis and the five services until Ctrl-C; print how agents connect."""
    from toolgate.cli.up import run_up

    try:
        env = up_env(config, mcp_servers)
    except (OSError, ValueError) as error:
        err_console.print("[red]error:[/red]", escape(str(error)), soft_wrap=True)
        raise typer.Exit(1) from None
    raise typer.Exit(run_up(console, err_console, absolute(state or state_dir()), insecure, env))


Chat = Annotated[
    str | None,
    typer.Option(
        "--chat",
        help="matrix: approve a write from a Matrix room on a local Synapse (./dev synapse installs it) and "
        "print the room's transcript.",
    ),
]


@app.command()
def demo(insecure: Insecure = False, chat: Chat = None) -> None:
    """Run the scripted demo on real files, a real git repository, NATS (secured) and Redis."""
    from toolgate.cli.announce import insecure_banner

    if insecure:
        insecure_banner(console)
    if chat is not None and chat != "matrix":
        err_console.print(f"--chat {chat!r}: only matrix runs locally (Slack needs Slack's servers; see the README)")
        raise typer.Exit(2)
    if chat == "matrix":
        from toolgate.cli.demo_chat import run_chat_demo

        raise typer.Exit(run_chat_demo(console, insecure))
    from toolgate.cli.demo import run_demo

    raise typer.Exit(run_demo(console, insecure))


Concurrency = Annotated[
    list[int] | None,
    typer.Option("--concurrency", min=1, help="Calls in flight; repeat for several runs (default: 8 and 64)."),
]


Tools = Annotated[
    list[int] | None,
    typer.Option(
        "--tools",
        min=1,
        help="Also measure the governed call with this many tools registered; repeat to sweep (e.g. 10 and 10000).",
    ),
]
RssCalls = Annotated[
    int, typer.Option("--rss-calls", min=0, help="Governed calls made in all before the memory is read (e.g. 10000).")
]
Calls = Annotated[int, typer.Option("--calls", min=1, help="Calls per row at each concurrency.")]


@app.command()
def bench(
    calls: Calls = 500,
    concurrency: Concurrency = None,
    insecure: Insecure = False,
    as_json: AsJson = False,
    tools: Tools = None,
    rss_calls: RssCalls = 0,
) -> None:
    """Governed call vs a bare NATS request/reply and the transport floor: ratios, CPU, memory, stages."""
    from toolgate.cli.announce import insecure_banner
    from toolgate.cli.bench.run import run_bench

    out = err_console if as_json else console
    if insecure:
        insecure_banner(out)
    raise typer.Exit(run_bench(out, calls, concurrency or [8, 64], insecure, as_json, tools, rss_calls))


def main() -> None:
    """Entry point of the ``toolgate`` command."""
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    app()
