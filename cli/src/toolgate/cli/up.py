"""``toolgate up``: the whole system on this machine until Ctrl-C, NATS secured unless ``--insecure``."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from toolgate.cli.announce import announce, insecure_banner, outside_server_refusal
from toolgate.cli.stack import AuthMode, Stack, running_stack
from toolgate.shared.connections import NatsUnreachable, redact
from toolgate.shared.directory import DirectoryInvalid

__all__ = ["run_up"]


def run_up(
    console: Console, err_console: Console, state: Path, insecure: bool, config_env: dict[str, str] | None = None
) -> int:
    """Start everything under ``state``, announce it, and run until a signal or a service exits.

    ``config_env`` is the services' environment for ``--config`` / ``--mcp-servers``
    (:func:`toolgate.cli.config_commands.up_env`).

    Returns:
        The exit code: 0 after Ctrl-C (or SIGTERM, SIGHUP), 1 when the stack could not
        start, 2 when ``NATS_URL`` is set without ``insecure`` (nothing was started).
    """
    if refusal := outside_server_refusal(insecure):
        err_console.print("[red]error:[/red]", escape(refusal))
        return 2
    if insecure:
        insecure_banner(console)
    sandbox = state / "sandbox"
    sandbox.mkdir(parents=True, exist_ok=True)
    env = {"TOOLGATE_EXECUTOR_SANDBOX_ROOT": os.environ.get("TOOLGATE_EXECUTOR_SANDBOX_ROOT", str(sandbox))}
    env.update(config_env or {})
    _interrupt_on_signals()
    try:
        with contextlib.ExitStack() as resources:
            with console.status("starting nats-server, redis-server and the five services…"):
                auth: AuthMode = "open" if insecure else "secured"
                stack = resources.enter_context(running_stack(state, env, auth=auth, redis_persistent=True))
            url_file = state / "nats_url"
            url_file.write_text(stack.nats_url)
            resources.callback(url_file.unlink, missing_ok=True)
            announce(console, stack, env["TOOLGATE_EXECUTOR_SANDBOX_ROOT"], state)
            _run_until_stopped(console, stack)
    except KeyboardInterrupt:
        pass
    except (RuntimeError, TimeoutError, NatsUnreachable, OSError, DirectoryInvalid) as error:
        err_console.print("[red]toolgate could not start:[/red]", escape(redact(str(error))))
        return 1
    console.print("toolgate stopped")
    return 0


def _interrupt_on_signals() -> None:
    """SIGTERM, SIGHUP and SIGINT (ignored by default in background jobs) stop ``up``, even while starting."""

    def interrupt(number: int, frame: object) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, interrupt)


def _run_until_stopped(console: Console, stack: Stack) -> None:
    while not stack.dead():
        time.sleep(0.5)
    console.print(f"[red]{', '.join(stack.dead())} exited[/red]; see the logs")
