"""``effectgate up``: the whole system on this machine until Ctrl-C, NATS secured unless ``--insecure``."""

from __future__ import annotations

import contextlib
import os
import signal
from functools import partial
from pathlib import Path

import nats.errors
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from effectgate.cli.stack.announce import announce, insecure_banner, outside_server_refusal
from effectgate.cli.stack.clustered import ClusterSizeInvalid, checked_size
from effectgate.cli.stack.launch import AuthMode, running_stack
from effectgate.cli.stack.ports import Ports, stable_ports
from effectgate.cli.stack.supervise import SupervisionSettings, Supervisor
from effectgate.cli.stack.tool_states_watch import ToolStateWatch
from effectgate.contracts.directory import DirectoryInvalid
from effectgate.contracts.errors import described
from effectgate.shared.runtime.connections import NatsUnreachable, redact

__all__ = ["run_up"]


def run_up(
    console: Console,
    err_console: Console,
    state: Path,
    insecure: bool,
    config_env: dict[str, str] | None = None,
    cluster: int = 1,
) -> int:
    """Start everything under ``state``, announce it, and keep it running until a signal.

    What exits is reported and restarted (:mod:`effectgate.cli.stack.supervise`).

    ``config_env`` is the services' environment for ``--config`` / ``--mcp-servers``
    (:func:`effectgate.cli.commands.config.up_env`). ``cluster`` is the NATS node count
    (:mod:`effectgate.cli.stack.clustered`: 3 or 5 adds Redis Sentinels and a second replica of
    every service).

    While starting, each thing awaited is said once (``waiting for registry: listing MCP
    servers: git``); a service not ready within ``EFFECTGATE_UP_READY_TIMEOUT_S`` stops the
    start, an MCP server still starting does not (it is listed as starting).

    Returns:
        The exit code: 0 after Ctrl-C (or SIGTERM, SIGHUP), 1 when the stack could not
        start, 2 when ``NATS_URL`` is set without ``insecure``, ``cluster`` is not 1, 3 or 5, or a
        ``EFFECTGATE_UP_*`` setting is invalid (nothing was started), 3 after giving up on a process.
    """
    if refusal := outside_server_refusal(insecure):
        err_console.print("[red]error:[/red]", escape(refusal))
        return 2
    try:
        checked_size(cluster)
    except ClusterSizeInvalid as error:
        err_console.print("[red]error:[/red]", escape(str(error)))
        return 2
    try:
        supervision = SupervisionSettings()
    except ValidationError as error:
        err_console.print("[red]error: invalid EFFECTGATE_UP_ setting:[/red]", escape(str(error)))
        return 2
    if insecure:
        insecure_banner(console)
    _interrupt_on_signals()
    try:
        code = _run(console, state, insecure, supervision, config_env or {}, cluster)
    except KeyboardInterrupt:
        code = 0
    except (RuntimeError, TimeoutError, NatsUnreachable, nats.errors.Error, OSError, DirectoryInvalid) as error:
        err_console.print("[red]effectgate could not start:[/red]", escape(redact(described(error))))
        return 1
    console.print("effectgate stopped")
    return code


def _run(
    console: Console,
    state: Path,
    insecure: bool,
    supervision: SupervisionSettings,
    config_env: dict[str, str],
    cluster: int = 1,
) -> int:
    """Start the stack on stable ports, announce it, supervise it; everything is stopped on return."""
    env = children_env(state) | config_env
    what = f"a {cluster}-node NATS cluster, Redis with Sentinels" if cluster > 1 else "nats-server, redis-server"
    with contextlib.ExitStack() as resources:
        with console.status(f"starting {what} and the services…"):
            auth: AuthMode = "open" if insecure else "secured"
            stack = resources.enter_context(
                running_stack(
                    state,
                    env,
                    auth=auth,
                    redis_persistent=True,
                    ports=partial(_ports, console, state, cluster > 1),
                    ready_timeout_s=supervision.ready_timeout_s,
                    note=partial(_waiting, console),
                    cluster=cluster,
                )
            )
        _still_starting(console, stack.mcp_starting, supervision.ready_timeout_s)
        url_file = state / "nats_url"
        url_file.write_text(stack.nats_url)
        resources.callback(url_file.unlink, missing_ok=True)
        announce(console, stack, env["EFFECTGATE_EXECUTOR_SANDBOX_ROOT"], state)
        with ToolStateWatch(stack, console):
            return Supervisor.of(stack, supervision, console).run()


def _waiting(console: Console, line: str) -> None:
    """One line of what the start is waiting for (``waiting for executor: …``)."""
    console.print(f"[dim]{escape(line)}[/dim]", soft_wrap=True)


def _still_starting(console: Console, servers: list[str], waited_s: float) -> None:
    """Say which MCP servers are still starting: listed ``starting``, the stack runs on."""
    if servers:
        line = (
            f"MCP server{'s' if len(servers) > 1 else ''} {', '.join(servers)} still starting after {waited_s:g} s "
            "(EFFECTGATE_UP_READY_TIMEOUT_S): listed as starting; their calls are refused until they are ready"
        )
        console.print(f"[yellow]{escape(line)}[/yellow]", soft_wrap=True)


def _ports(console: Console, state: Path, clustered: bool = False) -> Ports:
    """The stable ports (:mod:`effectgate.cli.stack.ports`), each one found taken reported.

    A cluster's servers listen on free ports: what is said of the single servers' ports is left out.
    """
    ports = stable_ports(state)
    servers = ("nats", "redis")
    for note in (n for n in ports.notes if not (clustered and n.split(":")[0].startswith(servers))):
        console.print(f"[yellow]port:[/yellow] {escape(note)}")
    return ports


def children_env(state: Path) -> dict[str, str]:
    """The settings ``up`` gives every service on top of the stack's own (which adds the HTTP ports)."""
    sandbox = state / "sandbox"
    sandbox.mkdir(parents=True, exist_ok=True)
    return {"EFFECTGATE_EXECUTOR_SANDBOX_ROOT": os.environ.get("EFFECTGATE_EXECUTOR_SANDBOX_ROOT", str(sandbox))}


def _interrupt_on_signals() -> None:
    """SIGTERM, SIGHUP and SIGINT (ignored by default in background jobs) stop ``up``, even while starting."""

    def interrupt(number: int, frame: object) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, interrupt)
