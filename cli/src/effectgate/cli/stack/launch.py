"""Running the whole system locally: servers, keys, and the five services as processes.

What runs is a :class:`~effectgate.cli.stack.system.Stack`.

When ``NATS_URL`` / ``REDIS_URL`` are unset, a nats-server (JetStream) and a
redis-server are started on free loopback ports under the state directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from effectgate.cli.stack.clustered import REPLICAS, ClusterServers, cluster_servers, replica_names
from effectgate.cli.stack.credentials import BusCredentials, kept_passwords, stack_directory, write_private
from effectgate.cli.stack.files import DEPLOY_DIR, chosen_config, config_env
from effectgate.cli.stack.ports import Ports, http_port_env, record, settle
from effectgate.cli.stack.readiness import wait_ready
from effectgate.cli.stack.system import Stack
from effectgate.cli.stack.waiting import Note
from effectgate.cli.stack.workers import configured_workers, with_workers
from effectgate.devstack.servers import ServerProcess, nats_server, redis_server
from effectgate.shared.config.keyring import lay_out_keys

__all__ = [
    "CHATOPS",
    "DEPLOY_DIR",
    "SERVICES",
    "AuthMode",
    "chosen_config",
    "config_env",
    "credentials_dir",
    "replicas_per_service",
    "running_stack",
]

SERVICES = ("registry", "policy", "approvals", "executor", "audit")
"""Start order: the registry provisions the bus the others bind to."""

CHATOPS = "chatops"
"""The chat-ops bot: started after the others when its platform is configured (``EFFECTGATE_CHATOPS_PLATFORM``)."""

log = logging.getLogger("effectgate.stack")

AuthMode = Literal["open", "secured"]
"""``secured``: one NATS user per service, agent, approver and the operator; ``open``: no users."""


def base_env(state_dir: Path, nats_url: str, redis_url: str, extra: dict[str, str]) -> dict[str, str]:
    """The environment every service process gets."""
    env = dict(os.environ)
    env.update(chosen_config(extra))
    env.update(
        {
            "NATS_URL": nats_url,
            "REDIS_URL": redis_url,
            "EFFECTGATE_AUDIT_DATABASE": str(state_dir / "audit.sqlite3"),
        }
    )
    env.setdefault("EFFECTGATE_CHATOPS_MATRIX_STATE_DIR", str(state_dir / "chatops"))  # answers given while it was down
    env.update(extra)
    return env


def credentials_dir(state_dir: Path) -> Path:
    """The client credentials files of a secured stack: ``<state_dir>/credentials``."""
    return state_dir / "credentials"


@contextlib.contextmanager
def running_servers(
    state_dir: Path, nats_config: Path | None = None, redis_persistent: bool = False, ports: Ports | None = None
) -> Iterator[dict[str, ServerProcess | str]]:
    """``{"nats": …, "redis": …}``: a URL from the environment, or a server started here.

    Args:
        state_dir: where started servers keep their data and logs.
        nats_config: a nats-server config (users, permissions) for a started nats-server.
        redis_persistent: a started redis-server fsyncs an append-only file before every
            reply, so a restart keeps what it acknowledged (``effectgate up``); without it a
            restart starts empty and the services rebuild their indexes from the stream.
        ports: the ports to listen on (``nats``, ``nats-monitoring``, ``redis``); default: free ones.

    Their output is appended to ``<state_dir>/logs/nats-server.log`` and ``redis-server.log``.
    """
    logs = state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    nats_ports = (ports.chosen["nats"], ports.chosen["nats-monitoring"]) if ports else None
    with contextlib.ExitStack() as stack:
        nats: ServerProcess | str = os.environ.get("NATS_URL") or stack.enter_context(
            nats_server(state_dir / "nats", nats_config, ports=nats_ports, log=logs / "nats-server.log")
        )
        redis: ServerProcess | str = os.environ.get("REDIS_URL") or stack.enter_context(
            redis_server(
                state_dir / "redis",
                persistent=redis_persistent,
                port=ports.chosen["redis"] if ports else None,
                log=logs / "redis-server.log",
            )
        )
        yield {"nats": nats, "redis": redis}


@contextlib.contextmanager
def _only_stack_on(state_dir: Path) -> Iterator[None]:
    """Hold ``<state_dir>/stack.lock`` (``flock``): two stacks on one JetStream store would corrupt it.

    Raises:
        RuntimeError: another stack holds the lock (its pid is named).
    """
    with (state_dir / "stack.lock").open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            stop = f"stop it first (Ctrl-C where it runs, or kill -INT {holder})"
            running = f"an effectgate stack is already running on {state_dir} (pid {holder})"
            raise RuntimeError(f"{running}: {stop}") from None
        lock.truncate(0)
        lock.write(str(os.getpid()))
        lock.flush()
        yield


def _url(server: ServerProcess | str) -> str:
    return server if isinstance(server, str) else server.url


def _secure(
    state_dir: Path, extra_env: dict[str, str], auth: AuthMode, admin: bool
) -> tuple[BusCredentials | None, Path | None]:
    """Credentials and the nats-server config file of a ``secured`` stack; ``(None, None)`` when ``open``.

    Writes the clients' credentials files (:func:`credentials_dir`), keeping the passwords
    of the files an earlier start wrote, so a connected agent's file stays valid.

    Raises:
        RuntimeError: ``secured`` with ``NATS_URL`` set (an outside server has other users).
        effectgate.contracts.directory.DirectoryInvalid: the principal directory cannot be used.
    """
    if auth == "open":
        log.warning("NATS runs without users (auth=open): any client may publish and read anything")
        return None, None
    if os.environ.get("NATS_URL"):
        raise RuntimeError("a secured stack starts its own nats-server: unset NATS_URL")
    folder = credentials_dir(state_dir)
    directory = with_workers(stack_directory(chosen_config(extra_env)), configured_workers(extra_env))
    credentials, config = BusCredentials.generate(directory, admin=admin, keep=kept_passwords(folder))
    credentials.write_files(folder)
    return credentials, write_private(state_dir / "nats-auth.conf", config)


@contextlib.contextmanager
def running_stack(
    state_dir: Path,
    extra_env: dict[str, str] | None = None,
    auth: AuthMode = "secured",
    redis_persistent: bool = False,
    policy_required: bool = True,
    admin: bool = False,
    ports: Callable[[], Ports] | None = None,
    ready_timeout_s: float = 60.0,
    note: Note | None = None,
    cluster: int = 1,
    replicas: int | None = None,
) -> Iterator[Stack]:
    """Servers, keys, all five services and the configured tool workers; everything is stopped on exit.

    Args:
        state_dir: keys, logs, server data and (``secured``) the NATS config with its
            passwords and the clients' credentials files.
        extra_env: service environment on top of :func:`base_env`.
        auth: ``secured`` or ``open`` (see :data:`AuthMode`).
        redis_persistent: see :func:`running_servers`.
        policy_required: a policy service without a usable policy fails the start
            (:class:`PolicyNotReady`); ``False`` only logs it (a stack that must deny everything).
        admin: ``secured`` only: also the all-rights ``admin`` user (test observers, the
            bench's bare echo); never for a stack people work with.
        ports: chooses, under the stack's lock, where the started servers and the services'
            HTTP listen (``EFFECTGATE_<SERVICE>_HTTP_PORT``; :func:`effectgate.cli.stack.ports.stable_ports`);
            default: free ports, no HTTP. A chosen port taken before it is bound is replaced by a
            free one; ``Stack.ports`` then holds what is listened on, also recorded in ``ports.json``.
        ready_timeout_s: how long the registry, then the other services, may take to be ready,
            seconds; an MCP server still starting then does not stop the start (``Stack.mcp_starting``).
        note: told what the start is waiting for (:func:`effectgate.cli.stack.readiness.wait_ready`).
        cluster: NATS nodes; above 1 (:mod:`effectgate.cli.stack.clustered`): a NATS cluster with the
            streams and buckets at that many replicas, Redis with a replica and three Sentinels, and
            (unless ``replicas`` says otherwise) every service twice; the servers' ports are free ones.
        replicas: processes of each service (``policy``, ``policy-2`` …; the audit's second is its
            standby writer); default: :data:`REPLICAS` on a cluster, 1 on one nats-server.

    Raises:
        ValueError: ``replicas`` below 1 (nothing is started).
        RuntimeError / TimeoutError: a service did not come up, or ``secured`` with ``NATS_URL`` set
            (a cluster: ``NATS_URL`` or ``REDIS_URL`` set).
    """
    each = replicas_per_service(cluster, replicas)
    state_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as held:
        held.enter_context(_only_stack_on(state_dir))
        lay_out_keys(state_dir / "keys")
        chosen = ports() if ports else None
        extra_env = {**(extra_env or {}), **(http_port_env(chosen) if chosen else {})}
        credentials, nats_config = _secure(state_dir, extra_env, auth, admin)
        if cluster > 1:
            stack = _clustered(held, state_dir, cluster, nats_config, extra_env)
        else:
            stack = _single(held, state_dir, nats_config, redis_persistent, chosen, extra_env)
        stack.credentials, stack.ports = credentials, chosen
        held.callback(stack.listeners.close)
        held.callback(stack.stop_all)
        _start_services(stack, policy_required, ready_timeout_s, note, each)
        for name, module in configured_workers(extra_env).items():
            stack.start_worker(name, module)
        if chosen:
            settle(chosen, stack.listening())
            record(state_dir, chosen)
        yield stack


def replicas_per_service(cluster: int, replicas: int | None) -> int:
    """Processes per service: ``replicas``, else :data:`REPLICAS` on a cluster and 1 on one node.

    Raises:
        ValueError: ``replicas`` is below 1.
    """
    if replicas is None:
        return REPLICAS if cluster > 1 else 1
    if replicas < 1:
        raise ValueError(f"a stack runs at least one process of each service, not {replicas}")
    return replicas


def _single(
    held: contextlib.ExitStack,
    state_dir: Path,
    nats_config: Path | None,
    redis_persistent: bool,
    chosen: Ports | None,
    extra_env: dict[str, str],
) -> Stack:
    """A stack on one nats-server and one redis-server (started, or given by URL)."""
    servers = held.enter_context(running_servers(state_dir, nats_config, redis_persistent, chosen))
    nats_url, redis_url = _url(servers["nats"]), _url(servers["redis"])
    stack = Stack(state_dir, nats_url, redis_url, base_env(state_dir, nats_url, redis_url, extra_env))
    stack.servers = {name: server for name, server in servers.items() if not isinstance(server, str)}
    return stack


def _clustered(
    held: contextlib.ExitStack, state_dir: Path, size: int, nats_config: Path | None, extra_env: dict[str, str]
) -> Stack:
    """A stack on a ``size``-node NATS cluster and a Redis Sentinel group, the bus at ``size`` replicas."""
    started: ClusterServers = held.enter_context(cluster_servers(state_dir, size, nats_config))
    nats_url, redis_url = started.nats_url, started.redis.url
    env = base_env(state_dir, nats_url, redis_url, {**extra_env, "EFFECTGATE_BUS_REPLICAS": str(size)})
    stack = Stack(state_dir, nats_url, redis_url, env, cluster=started.nats, sentinels=started.redis)
    stack.servers = started.processes()
    return stack


def _start_services(
    stack: Stack, policy_required: bool, timeout_s: float, note: Note | None, replicas: int = 1
) -> None:
    """Start the registry (it provisions the bus), then the other services; wait until each serves.

    Each service runs ``replicas`` times (``policy``, ``policy-2`` …); the registry's other replicas
    start once the first has provisioned the bus.

    Then each configured MCP server is awaited until it has left ``starting``, at most until
    the same deadline; those still starting are kept in ``stack.mcp_starting``.

    Raises:
        RuntimeError / TimeoutError: a service did not come up.
    """
    stack.start("registry")
    asyncio.run(wait_ready(stack, ("registry",), timeout_s, note=note))
    for name in replica_names("registry", replicas)[1:]:
        stack.start("registry", name)
    services = (*SERVICES[1:], CHATOPS) if stack.env.get("EFFECTGATE_CHATOPS_PLATFORM") else SERVICES[1:]
    since = datetime.now(UTC)
    for service in services:
        for name in replica_names(service, replicas):
            stack.start(service, name)
    ready = wait_ready(stack, services, timeout_s, policy_required=policy_required, note=note, mcp_since=since)
    stack.mcp_starting = asyncio.run(ready)
