"""A Redis primary, one replica and three Sentinels on free loopback ports, with failover handles.

Used by the tests of Redis failover (:func:`effectgate.devstack.testing.redis_sentinels`).
The Sentinels decide quickly (the primary is down after ``down_after_ms`` without an
answer; 2 of 3 agree), so a failover takes a few seconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import redis

from effectgate.devstack.processes import spawn
from effectgate.devstack.servers import ServerProcess, _redis_ready, redis_server
from effectgate.devstack.starting import find_binary, ready_or_stopped, started_on_a_free_port

__all__ = ["MASTER", "SentinelGroup", "sentinel_group"]

MASTER = "effectgate"
"""The master name the Sentinels know the primary by."""


@dataclass
class SentinelGroup:
    """The servers of a Sentinel deployment; :attr:`url` is what ``REDIS_URL`` takes.

    Attributes:
        primary / replica: the redis-servers as started (roles swap after a failover).
        sentinels: the three Sentinels.
    """

    primary: ServerProcess
    replica: ServerProcess
    sentinels: list[ServerProcess]

    @property
    def url(self) -> str:
        """``redis+sentinel://127.0.0.1:<p1>,…/<master>/0``."""
        hosts = ",".join(f"127.0.0.1:{s.ports['redis']}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER}/0"

    def master_port(self) -> int | None:
        """The primary's port as the first answering Sentinel names it (None: none answers)."""
        for sentinel in self.sentinels:
            with contextlib.suppress(redis.RedisError), _client(sentinel.ports["redis"]) as client:
                address = client.sentinel_get_master_addr_by_name(MASTER)
                return int(address[1]) if address else None
        return None

    @contextlib.contextmanager
    def replication_held(self) -> Iterator[None]:
        """Writes inside this block reach the primary only, never the replica.

        The replica is stopped (SIGSTOP) and the primary drops its replication link, so
        nothing written meanwhile is in flight to the replica, not even in a socket buffer;
        the replica resumes (SIGCONT) on leaving. Kill the primary inside the block
        (:meth:`kill_primary`) and the replica never receives those writes.
        """
        os.kill(self.replica.process.pid, signal.SIGSTOP)
        try:
            with _client(self.primary.ports["redis"]) as client:
                client.client_kill_filter(_type="replica")
            yield
        finally:
            os.kill(self.replica.process.pid, signal.SIGCONT)

    def kill_primary(self) -> None:
        """SIGKILL the primary (its unreplicated writes are gone with it)."""
        self.primary.kill()

    def wait_failover(self, timeout_s: float = 30.0) -> int:
        """Wait until the Sentinels name the replica as primary and it answers as one; its port.

        Raises:
            TimeoutError: no failover within ``timeout_s`` seconds.
        """
        port, deadline = self.replica.ports["redis"], time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.master_port() == port and _role(port) == "master":
                return port
            time.sleep(0.1)
        raise TimeoutError(f"no failover to 127.0.0.1:{port} within {timeout_s} s")


@contextlib.contextmanager
def sentinel_group(workdir: Path, down_after_ms: int = 1000, timeout_s: float = 30.0) -> Iterator[SentinelGroup]:
    """Start a primary, a replica of it and three Sentinels watching it; stop them all after.

    Ready when the replica is in sync and every Sentinel knows the replica and the two others.

    Raises:
        FileNotFoundError: no redis-server binary.
        RuntimeError / TimeoutError: a server did not come up, or the group did not form.
    """
    with contextlib.ExitStack() as stack:
        primary = stack.enter_context(redis_server(workdir / "primary"))
        port = str(primary.ports["redis"])
        replica = stack.enter_context(redis_server(workdir / "replica", extra=("--replicaof", "127.0.0.1", port)))
        sentinels = []
        for n in range(3):
            sentinel = _sentinel(workdir / f"sentinel{n}", primary, replica, down_after_ms)
            stack.callback(sentinel.stop)
            sentinels.append(sentinel)
        group = SentinelGroup(primary, replica, sentinels)
        _wait_formed(group, timeout_s)
        yield group


def _sentinel(workdir: Path, primary: ServerProcess, replica: ServerProcess, down_after_ms: int) -> ServerProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "sentinel.log"

    def start(port: int) -> ServerProcess:
        config = workdir / "sentinel.conf"
        config.write_text(_config(workdir, port, primary.ports["redis"], replica.ports["redis"], down_after_ms))
        proc = spawn([find_binary("redis-server", "REDIS_SERVER_BIN"), str(config), "--sentinel"], log)
        server = ServerProcess(f"redis://127.0.0.1:{port}", proc, log, partial(_redis_ready, port))
        ready_or_stopped(server, partial(_redis_ready, port, proc), 15.0)
        server.ports = {"redis": port}
        return server

    return started_on_a_free_port(start, 5)


def _config(workdir: Path, port: int, primary: int, replica: int, down_after_ms: int) -> str:
    lines = [f"port {port}", "bind 127.0.0.1", f"dir {workdir}", f"logfile {workdir / 'sentinel.log'}"]
    lines += [f"sentinel monitor {MASTER} 127.0.0.1 {primary} 2"]
    lines += [f"sentinel down-after-milliseconds {MASTER} {down_after_ms}"]
    lines += [f"sentinel failover-timeout {MASTER} 10000", f"sentinel known-replica {MASTER} 127.0.0.1 {replica}"]
    return "\n".join(lines) + "\n"


def _wait_formed(group: SentinelGroup, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _in_sync(group.replica.ports["redis"]) and all(_knows_all(s.ports["redis"]) for s in group.sentinels):
            return
        time.sleep(0.2)
    raise TimeoutError(f"the Sentinel group did not form within {timeout_s} s")


def _in_sync(port: int) -> bool:
    with contextlib.suppress(redis.RedisError), _client(port) as client:
        return bool(client.info("replication").get("master_link_status") == "up")
    return False


def _knows_all(port: int) -> bool:
    with contextlib.suppress(redis.RedisError), _client(port) as client:
        return bool(len(client.sentinel_slaves(MASTER)) == 1 and len(client.sentinel_sentinels(MASTER)) == 2)
    return False


def _role(port: int) -> str | None:
    with contextlib.suppress(redis.RedisError), _client(port) as client:
        return str(client.info("replication").get("role"))
    return None


def _client(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, socket_connect_timeout=1, decode_responses=True)
