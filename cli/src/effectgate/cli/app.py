"""The ``effectgate`` command (typer + rich). Each command is a thin shell over a module."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from effectgate.cli.client.identity import state_dir
from effectgate.cli.client.session import console, err_console
from effectgate.cli.commands.approvals import approvals_app
from effectgate.cli.commands.audit import audit_app
from effectgate.cli.commands.budgets import budgets_app
from effectgate.cli.commands.call import call
from effectgate.cli.commands.config import ConfigPath, McpServersPath, config_app, up_env
from effectgate.cli.commands.mcp import mcp_app
from effectgate.cli.commands.nats_jwt import nats_jwt_app
from effectgate.cli.commands.policy import policy_app
from effectgate.cli.commands.requests import requests_command
from effectgate.cli.commands.tools import tools_describe, tools_list
from effectgate.cli.commands.tools_publish import tools_publish
from effectgate.cli.commands.uncertain import uncertain_app
from effectgate.cli.commands.withdraw import withdraw
from effectgate.cli.commands.worker import worker
from effectgate.cli.render.output import AsJson
from effectgate.contracts.directory import DirectoryInvalid
from effectgate.shared.config.keyring import HOLDERS, PUBLIC, lay_out_keys
from effectgate.shared.config.toml_file import absolute

__all__ = ["main"]

app = typer.Typer(help="effectgate: a governed gateway between AI agents and their tools.", no_args_is_help=True)
tools_app = typer.Typer(help="The tool registry.", no_args_is_help=True)
keys_app = typer.Typer(help="Signing keys: one directory per holder, its own private key only.", no_args_is_help=True)
tls_app = typer.Typer(help="TLS certificates of the NATS server.", no_args_is_help=True)
for sub, name in (
    (tools_app, "tools"),
    (approvals_app, "approvals"),
    (audit_app, "audit"),
    (policy_app, "policy"),
    (budgets_app, "budgets"),
    (uncertain_app, "uncertain"),
    (config_app, "config"),
    (keys_app, "keys"),
    (tls_app, "tls"),
    (mcp_app, "mcp"),
    (nats_jwt_app, "nats-jwt"),
):
    app.add_typer(sub, name=name)
tools_app.command("list")(tools_list)
tools_app.command("describe")(tools_describe)
tools_app.command("publish")(tools_publish)
app.command("call")(call)
app.command("requests")(requests_command)
app.command("withdraw")(withdraw)
app.command("worker")(worker)


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"effectgate {metadata.version('effectgate-cli')}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """effectgate: a governed gateway between AI agents and their tools."""


@keys_app.command("generate")
def keys_generate(directory: Path) -> None:
    """Lay out every signing key and the sealing key under DIRECTORY, one directory per holder (keeping existing keys).

    DIRECTORY/<service> is what that service mounts as EFFECTGATE_KEYS_DIR; DIRECTORY/public
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
    from effectgate.cli.commands.tls import generate_tls

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
    from effectgate.cli.stack.credentials import config_text, env_lines
    from effectgate.contracts.directory import load_directory

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
    typer.Option("--state-dir", help="Keys, logs, data, credentials (env EFFECTGATE_STATE_DIR, default .effectgate)."),
]


Cluster = Annotated[
    int,
    typer.Option(
        "--cluster",
        help="NATS nodes: 3 (or 5) runs a NATS cluster with the bus at that many replicas, Redis with a "
        "replica and three Sentinels, and two replicas of every service; 1 (default): one of each.",
    ),
]


@app.command()
def up(
    state: StateDir = None,
    insecure: Insecure = False,
    config: ConfigPath = None,
    mcp_servers: McpServersPath = None,
    cluster: Cluster = 1,
) -> None:
    """Run NATS (secured), Redis and the five services until Ctrl-C; print how agents connect."""
    from effectgate.cli.stack.up import run_up

    try:
        env = up_env(config, mcp_servers)
    except (OSError, ValueError) as error:
        err_console.print("[red]error:[/red]", escape(str(error)), soft_wrap=True)
        raise typer.Exit(1) from None
    raise typer.Exit(run_up(console, err_console, absolute(state or state_dir()), insecure, env, cluster))


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
    from effectgate.cli.stack.announce import insecure_banner

    if insecure:
        insecure_banner(console)
    if chat is not None and chat != "matrix":
        err_console.print(f"--chat {chat!r}: only matrix runs locally (Slack needs Slack's servers; see the README)")
        raise typer.Exit(2)
    if chat == "matrix":
        from effectgate.cli.demo.chat import run_chat_demo

        raise typer.Exit(run_chat_demo(console, insecure))
    from effectgate.cli.demo.script import run_demo

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
Flood = Annotated[
    int,
    typer.Option(
        "--flood", min=0, help="Also time 20 governed calls while another agent submits this many requests (e.g. 3000)."
    ),
]


BenchCluster = Annotated[
    int,
    typer.Option(
        "--cluster",
        help="NATS nodes: 3 (or 5) measures on a NATS cluster with the streams and buckets at that many "
        "replicas and Redis with Sentinels; 1 (default): one nats-server.",
    ),
]
Replicas = Annotated[
    int | None,
    typer.Option(
        "--replicas", min=1, max=4, help="Processes of each service, 1 to 4 (default: 2 with --cluster 3 or 5, else 1)."
    ),
]


@app.command()
def bench(
    calls: Calls = 500,
    concurrency: Concurrency = None,
    insecure: Insecure = False,
    as_json: AsJson = False,
    tools: Tools = None,
    rss_calls: RssCalls = 0,
    flood: Flood = 0,
    cluster: BenchCluster = 1,
    replicas: Replicas = None,
) -> None:
    """Governed call vs a bare NATS request/reply and the transport floor: ratios, CPU, memory, stages."""
    from effectgate.cli.bench.run import run_bench
    from effectgate.cli.stack.announce import insecure_banner
    from effectgate.cli.stack.clustered import ClusterSizeInvalid, checked_size

    try:
        checked_size(cluster)
    except ClusterSizeInvalid as error:
        err_console.print("[red]error:[/red]", escape(str(error)))
        raise typer.Exit(2) from None
    out = err_console if as_json else console
    if insecure:
        insecure_banner(out)
    code = run_bench(out, calls, concurrency or [8, 64], insecure, as_json, tools, rss_calls, flood, cluster, replicas)
    raise typer.Exit(code)


def main() -> None:
    """Entry point of the ``effectgate`` command."""
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    app()
