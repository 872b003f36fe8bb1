"""``effectgate up`` watches what it started: a death is reported at once and restarted, within limits."""

from __future__ import annotations

import shutil
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from rich.console import Console
from rich.markup import escape

from effectgate.cli.stack.system import Stack
from effectgate.contracts.errors import described

__all__ = ["GAVE_UP", "SupervisionSettings", "Supervisor", "Watched", "exit_status", "log_tail"]

GAVE_UP = 3
"""``up``'s exit code after giving up on a process that kept exiting."""


class SupervisionSettings(BaseSettings):
    """How long ``up`` waits for what it starts, and how it restarts what exits (env ``EFFECTGATE_UP_*``)."""

    model_config = SettingsConfigDict(env_prefix="EFFECTGATE_UP_", extra="ignore")

    ready_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="How long the registry, then the other services, may take to be ready at start, seconds; an MCP "
        "server still starting then does not stop the start (it is listed as starting).",
    )
    restart_limit: int = Field(default=5, ge=0, description="Restarts allowed per process within the window.")
    restart_window_s: float = Field(default=300.0, gt=0, description="The window restarts are counted in, seconds.")
    restart_backoff_s: float = Field(default=1.0, ge=0, description="Wait before the first restart, seconds.")
    restart_backoff_max_s: float = Field(default=30.0, ge=0, description="Longest wait before a restart, seconds.")
    restart_healthy_s: float = Field(
        default=60.0, gt=0, description="How long a process must run for its next restart to wait the first backoff."
    )
    log_max_bytes: int = Field(default=10 * 2**20, gt=0, description="A log's size before its older part moves.")


@dataclass
class Watched:
    """One process ``up`` keeps running: how to see it exit, how to start it again, its log."""

    name: str
    log: Path
    exited: Callable[[], int | None]
    restart: Callable[[], None]
    restarts: deque[float] = field(default_factory=deque)
    due: float | None = None
    """When a restart is scheduled (``time.monotonic()``), ``None`` while it runs."""
    started: float | None = None
    """When it was last restarted (``time.monotonic()``), ``None`` before its first restart."""
    streak: int = 0
    """Restarts in a row after which it ran less than ``restart_healthy_s``: the backoff's exponent."""


class Supervisor:
    """Polls every watched process of a stack and restarts what exits (see the module's doc)."""

    def __init__(self, watched: list[Watched], settings: SupervisionSettings, console: Console) -> None:
        self.watched, self.settings, self.console = watched, settings, console

    @classmethod
    def of(cls, stack: Stack, settings: SupervisionSettings, console: Console) -> Supervisor:
        """A supervisor of every service process and every server ``stack`` started."""
        watched = [_service(stack, name) for name in stack.processes]
        return cls(watched + [_server(stack, name) for name in stack.servers], settings, console)

    def run(self, tick_s: float = 0.2) -> int:
        """Watch until a process is given up on (returns :data:`GAVE_UP`); a signal ends it by raising."""
        while True:
            for watched in self.watched:
                if gave_up := self.check(watched, time.monotonic()):
                    self.console.print(f"[red]{escape(gave_up)}[/red]")
                    return GAVE_UP
            time.sleep(tick_s)

    def check(self, watched: Watched, now: float) -> str | None:
        """Report a death, schedule or perform its restart; the give-up message when over the limit."""
        _bound(watched.log, self.settings.log_max_bytes)
        if watched.due is not None:
            if now >= watched.due:
                self._restart(watched, now)
            return None
        code = watched.exited()
        return None if code is None else self._died(watched, code, now)

    def _died(self, watched: Watched, code: int, now: float) -> str | None:
        settings = self.settings
        while watched.restarts and now - watched.restarts[0] > settings.restart_window_s:
            watched.restarts.popleft()
        recent = len(watched.restarts)
        if watched.started is not None and now - watched.started >= settings.restart_healthy_s:
            watched.streak = 0
        delay = min(settings.restart_backoff_s * 2**watched.streak, settings.restart_backoff_max_s)
        over = recent >= settings.restart_limit
        then = "giving up" if over else f"restarting in {delay:g}s"
        self.console.print(f"[red]{watched.name} exited ({exit_status(code)}); {then}[/red]")
        self.console.print(escape(log_tail(watched.log)), highlight=False)
        if over:
            return (
                f"gave up on {watched.name}: it exited {recent + 1} times within {settings.restart_window_s:g}s;"
                f" see {watched.log}"
            )
        watched.due = now + delay
        return None

    def _restart(self, watched: Watched, now: float) -> None:
        watched.due, watched.started = None, now
        watched.streak += 1
        watched.restarts.append(now)
        try:
            watched.restart()
        except (RuntimeError, TimeoutError, OSError) as error:
            self.console.print(f"[red]{watched.name} did not start again:[/red] {escape(described(error)[-300:])}")
            return
        self.console.print(f"[green]{watched.name} restarted[/green]")


def exit_status(code: int) -> str:
    """``exit status 1``, or ``killed by SIGKILL`` for a negative Popen return code."""
    if code >= 0:
        return f"exit status {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def log_tail(log: Path, lines: int = 5, max_bytes: int = 8192) -> str:
    """The last ``lines`` non-empty lines of ``log``, indented; a note when it has none."""
    if not log.exists():
        return f"  (no log at {log})"
    with log.open("rb") as file:
        file.seek(max(0, log.stat().st_size - max_bytes))
        text = file.read().decode(errors="replace")
    last = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(f"  | {_clipped(line)}" for line in last) if last else f"  (nothing in {log})"


def _clipped(line: str, limit: int = 200) -> str:
    """``line``, or its first ``limit`` characters and ``…`` (the whole line is in the log)."""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _service(stack: Stack, name: str) -> Watched:
    return Watched(
        name, stack.state_dir / "logs" / f"{name}.log", lambda: stack.processes[name].poll(), _starter(stack, name)
    )


def _starter(stack: Stack, name: str) -> Callable[[], None]:
    return lambda: stack.restart(name)


def _server(stack: Stack, name: str) -> Watched:
    server = stack.servers[name]
    return Watched(f"{name}-server", server.log, lambda: server.process.poll(), server.restart)


def _bound(log: Path, max_bytes: int) -> None:
    """Move ``log``'s content to ``<log>.1`` once it exceeds ``max_bytes`` (writers append, so they go on)."""
    try:
        if log.stat().st_size <= max_bytes:
            return
        shutil.copyfile(log, log.with_name(log.name + ".1"))
        log.write_bytes(b"")
    except OSError:
        return
