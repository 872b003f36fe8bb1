"""How a local server is started: its binary, a free port, another one when that is lost, until it serves.

A free port is only free when it is chosen: another program may bind it before the server
does. A start that loses its port this way ends with the server's exit; it is retried on a
fresh port (:func:`started_on_a_free_port`), and readiness checks ask the server itself
(its own ports file, the ports its process listens on), never whatever answers on the port.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar, cast

from effectgate.devstack.processes import end, kill, listening_ports, spawn

__all__ = ["ServerProcess", "find_binary", "free_port", "listens", "ready_or_stopped", "started_on_a_free_port"]

T = TypeVar("T")


class ServerProcess:
    """A started server: its URL, process handle, and how to start it again on the same port.

    Args:
        url: the server's URL.
        process: the running process.
        log: its log file (appended to across restarts).
        ready: returns a true value once a freshly started process serves (used by :meth:`restart`).
    """

    def __init__(
        self,
        url: str,
        process: subprocess.Popen[bytes],
        log: Path,
        ready: Callable[[subprocess.Popen[bytes]], object] | None = None,
    ) -> None:
        self.url = url
        self.process = process
        self.log = log
        self.ports: dict[str, int] = {}
        """The ports it listens on by name (``nats``, ``nats-monitoring``, ``redis``), once it serves."""
        self._argv = [str(part) for part in cast(list[str], process.args)]
        self._ready = ready

    def stop(self, timeout_s: float = 10.0) -> None:
        """Terminate the process and its group, killing them after ``timeout_s`` seconds."""
        end(self.process, timeout_s)

    def kill(self) -> None:
        """SIGKILL the process and its group (fault injection) and reap it."""
        kill(self.process)

    def pin(self, argv: list[str]) -> None:
        """Restart with ``argv`` from now on (the ports the first start chose, made explicit)."""
        self._argv = argv

    def restart(self, timeout_s: float = 15.0) -> None:
        """Start the same command again (same port, same data directory) and wait until it serves.

        Raises:
            RuntimeError / TimeoutError: the server did not come up.
        """
        self.kill()
        self.process = spawn(self._argv, self.log)
        if self._ready is not None:
            ready = self._ready
            _wait(self.process, self.log, lambda: ready(self.process), timeout_s)


def find_binary(name: str, env_var: str, packaged: tuple[str, str] | None = None) -> str:
    """Locate a server binary.

    Order: ``$env_var``, the running interpreter's scripts dir, ``PATH`` (plus
    ``/usr/sbin``), then ``packaged = (module, relative path)`` inside an installed package.

    Raises:
        FileNotFoundError: nothing was found.
    """
    if found := os.environ.get(env_var):
        return found
    for directory in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    if found := shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin"):
        return found
    if packaged and (spec := importlib.util.find_spec(packaged[0])) and spec.origin:
        candidate = Path(spec.origin).parent / packaged[1]
        if candidate.is_file():
            return str(candidate)
    raise FileNotFoundError(f"{name}: set {env_var} or install it")


def _wait(proc: subprocess.Popen[bytes], log: Path, ready: Callable[[], T | None], timeout_s: float) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text(errors='replace')[-2000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"server not ready after {timeout_s}s")
        if result := ready():
            return result
        time.sleep(0.05)


def ready_or_stopped(server: ServerProcess, ready: Callable[[], T | None], timeout_s: float) -> T:
    """Wait for ``server`` to serve; stop it if it does not (no half-started server is left behind)."""
    try:
        return _wait(server.process, server.log, ready, timeout_s)
    except BaseException:
        server.stop()
        raise


def started_on_a_free_port(
    start: Callable[[int], ServerProcess], attempts: int, first: Callable[[], ServerProcess] | None = None
) -> ServerProcess:
    """``start(port)`` on a free port, again on another one when it loses the port to a race.

    ``first``: a start to try before them (on preferred ports); when it fails, free ports are tried.
    A start loses its port when the server exits (the port was taken between choice and bind).

    Raises:
        RuntimeError / TimeoutError: the last attempt's failure.
    """
    if first is not None:
        with contextlib.suppress(RuntimeError):  # its port was taken: free ones are tried below
            return first()
    for attempt in range(attempts):
        try:
            return start(free_port())
        except RuntimeError:
            if attempt == attempts - 1:
                raise
    raise RuntimeError("no attempt was made")


def free_port() -> int:
    """A loopback TCP port free now (the kernel's choice); the caller's start may still lose it to a race."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listens(process: subprocess.Popen[bytes], port: int) -> bool:
    """Whether ``process`` itself listens on ``port`` (``True`` when that cannot be known)."""
    ports = listening_ports(process.pid)
    return ports is None or port in ports
