"""Running the whole system locally: servers, keys, and the five services as processes.

When ``NATS_URL`` / ``REDIS_URL`` are unset, a nats-server (JetStream) and a
redis-server are started on free loopback ports under the state directory.

Two NATS modes (:data:`AuthMode`): ``secured`` (the default) runs nats-server with the
users and permissions of :mod:`toolgate.contracts.nats_permissions` for the stack's principal
directory, each service connected as its own user, and writes one credentials file per
agent, approver and the operator into ``<state_dir>/credentials/`` (passwords kept from
an earlier start); ``open`` runs it without users (anyone may do anything) and is only
ever asked for explicitly (``--insecure``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from toolgate.cli.credentials import BusCredentials, kept_passwords, stack_directory, write_private
from toolgate.cli.listeners import Listeners
from toolgate.cli.ports import Ports, http_port_env, record, settle
from toolgate.cli.readiness import wait_ready
from toolgate.cli.stack_files import DEPLOY_DIR, chosen_config, config_env
from toolgate.cli.waiting import Note
from toolgate.devstack.processes import end, owned, signal_group
from toolgate.devstack.servers import ServerProcess, nats_server, redis_server
from toolgate.shared.keyring import PUBLIC, lay_out_keys

__all__ = [
    "CHATOPS",
    "DEPLOY_DIR",
    "SERVICES",
    "AuthMode",
    "Stack",
    "chosen_config",
    "config_env",
    "credentials_dir",
    "running_stack",
]

SERVICES = ("registry", "policy", "approvals", "executor", "audit")
"""Start order: the registry provisions the bus the others bind to."""

CHATOPS = "chatops"
"""The chat-ops bot: started after the others when its platform is configured (``TOOLGATE_CHATOPS_PLATFORM``)."""

log = logging.getLogger("toolgate.stack")

AuthMode = Literal["open", "secured"]
"""``secured``: one NATS user per service, agent, approver and the operator; ``open``: no users."""


@dataclass
class Stack:
    """A running system: URLs, the environment the services got, their processes.

    Attributes:
        nats_url: the server's URL, without credentials.
        credentials: every NATS user's password and inbox when ``secured``; ``None`` when ``open``.
    """

    state_dir: Path
    nats_url: str
    redis_url: str
    env: dict[str, str]
    credentials: BusCredentials | None = None
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    servers: dict[str, ServerProcess] = field(default_factory=dict)
    """The nats-server and redis-server started for this stack (not those given by URL)."""
    policy_version: str | None = None
    """The version of the policy in force when the policy service reported ready."""
    ports: Ports | None = None
    """The ports chosen by ``up`` (:mod:`toolgate.cli.ports`), then those listened on; ``None``: free ones."""
    listeners: Listeners = field(default_factory=Listeners)
    """The sockets bound for the services' ports and handed down (:mod:`toolgate.cli.listeners`)."""
    mcp_starting: list[str] = field(default_factory=list)
    """The MCP servers still starting when the start's wait ended (listed ``starting``; the stack runs on)."""

    def has_user(self, user: str) -> bool:
        """Whether the NATS server knows ``user`` (``False`` for every user when ``open``)."""
        return self.credentials is not None and user in self.credentials.passwords

    def url_for(self, user: str) -> str:
        """The NATS URL ``user`` connects with: its credentials in it when ``secured``.

        Raises:
            KeyError: ``secured`` and no such user.
        """
        return self.credentials.url(self.nats_url, user) if self.credentials else self.nats_url

    def connect_options(self, user: str) -> dict[str, Any]:
        """``nats.connect`` options of ``user``: credentials and private inbox when ``secured``, else none.

        Raises:
            KeyError: ``secured`` and no such user.
        """
        return self.credentials.options(user) if self.credentials else {}

    def start(self, service: str, name: str | None = None) -> None:
        """Start one service process as its own NATS user, logging to ``<state_dir>/logs/<name>.log``.

        ``name`` (default: the service) tells replicas of one service apart: ``start("policy", "policy-2")``
        runs a second policy replica, stopped by ``stop("policy-2")``. Each port it listens on is
        bound here first and handed down (:mod:`toolgate.cli.listeners`); a restart gets the same.

        Raises:
            OSError: a port that may not move is taken.
        """
        logs, name = self.state_dir / "logs", name or service
        logs.mkdir(parents=True, exist_ok=True)
        handed, fds = self.listeners.handed(service, name, self.env)
        own = {"NATS_URL": self.url_for(service), "TOOLGATE_KEYS_DIR": str(self.keys_dir(service))}
        with (logs / f"{name}.log").open("ab") as sink:
            self.processes[name] = subprocess.Popen(
                [sys.executable, "-m", f"toolgate.{service}"],
                env={**self.env, **handed, **own},
                stdout=sink,
                stderr=subprocess.STDOUT,
                pass_fds=fds,
                **owned(),
            )

    def http_port(self, name: str, service: str | None = None) -> int | None:
        """The health and metrics port of process ``name`` (of ``service``, default ``name``); ``None``: none."""
        return self.listeners.port(name, f"TOOLGATE_{(service or name).upper()}_HTTP_PORT")

    def listening(self) -> dict[str, int]:
        """Every port by its :data:`toolgate.cli.ports.DEFAULT_PORTS` name: the servers' and each service's HTTP."""
        found = {name: port for server in self.servers.values() for name, port in server.ports.items()}
        return found | {name: port for name in self.processes if (port := self.http_port(name)) is not None}

    def keys_dir(self, holder: str) -> Path:
        """The keys directory of ``holder`` (a service, ``operator`` or ``public``; :mod:`toolgate.shared.keyring`)."""
        return self.state_dir / "keys" / holder

    @property
    def public_keys(self) -> Path:
        """Every public key: what an agent needs to verify receipts."""
        return self.keys_dir(PUBLIC)

    def stop(self, service: str, kill: bool = False) -> None:
        """Stop one service and its process group (SIGTERM, SIGKILL after 15 s; SIGKILL at once when ``kill``)."""
        process = self.processes.pop(service, None)
        if process is not None:
            end(process, 15.0, signal.SIGKILL if kill else signal.SIGTERM)

    def stop_all(self, timeout_s: float = 15.0) -> None:
        """Stop every service: SIGTERM to all at once (last started first), then wait for each.

        Each drains its own in-flight work; one still running after ``timeout_s`` seconds is killed
        (each with its process group).
        """
        running = [self.processes.pop(service) for service in reversed(list(self.processes))]
        for process in running:
            if process.poll() is None:
                signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for process in running:
            end(process, max(0.0, deadline - time.monotonic()), sig=None)

    def dead(self) -> list[str]:
        """Services whose process has exited."""
        return [name for name, proc in self.processes.items() if proc.poll() is not None]

    def last_words(self, service: str) -> str:
        """The last line ``service`` wrote to its log (why it exited), ``""`` when none."""
        log_file = self.state_dir / "logs" / f"{service}.log"
        lines = log_file.read_text(errors="replace").splitlines() if log_file.exists() else []
        return next((line.strip() for line in reversed(lines) if line.strip()), "")


def base_env(state_dir: Path, nats_url: str, redis_url: str, extra: dict[str, str]) -> dict[str, str]:
    """The environment every service process gets."""
    env = dict(os.environ)
    env.update(chosen_config(extra))
    env.update(
        {
            "NATS_URL": nats_url,
            "REDIS_URL": redis_url,
            "TOOLGATE_AUDIT_DATABASE": str(state_dir / "audit.sqlite3"),
        }
    )
    env.setdefault("TOOLGATE_CHATOPS_MATRIX_STATE_DIR", str(state_dir / "chatops"))  # answers given while it was down
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
            reply, so a restart keeps what it acknowledged (``toolgate up``); without it a
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
            raise RuntimeError(f"a toolgate stack is already running on {state_dir} (pid {holder})") from None
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
        toolgate.contracts.directory.DirectoryInvalid: the principal directory cannot be used.
    """
    if auth == "open":
        log.warning("NATS runs without users (auth=open): any client may publish and read anything")
        return None, None
    if os.environ.get("NATS_URL"):
        raise RuntimeError("a secured stack starts its own nats-server: unset NATS_URL")
    folder = credentials_dir(state_dir)
    directory = stack_directory(chosen_config(extra_env))
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
) -> Iterator[Stack]:
    """Servers, keys and all five services; everything is stopped on exit.

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
            HTTP listen (``TOOLGATE_<SERVICE>_HTTP_PORT``; :func:`toolgate.cli.ports.stable_ports`);
            default: free ports, no HTTP. A chosen port taken before it is bound is replaced by a
            free one; ``Stack.ports`` then holds what is listened on, also recorded in ``ports.json``.
        ready_timeout_s: how long the registry, then the other services, may take to be ready,
            seconds; an MCP server still starting then does not stop the start (``Stack.mcp_starting``).
        note: told what the start is waiting for (:func:`toolgate.cli.readiness.wait_ready`).

    Raises:
        RuntimeError / TimeoutError: a service did not come up, or ``secured`` with ``NATS_URL`` set.
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as held:
        held.enter_context(_only_stack_on(state_dir))
        lay_out_keys(state_dir / "keys")
        chosen = ports() if ports else None
        extra_env = {**(extra_env or {}), **(http_port_env(chosen) if chosen else {})}
        credentials, nats_config = _secure(state_dir, extra_env, auth, admin)
        servers = held.enter_context(running_servers(state_dir, nats_config, redis_persistent, chosen))
        nats_url, redis_url = _url(servers["nats"]), _url(servers["redis"])
        stack = Stack(state_dir, nats_url, redis_url, base_env(state_dir, nats_url, redis_url, extra_env))
        stack.credentials, stack.ports = credentials, chosen
        stack.servers = {name: server for name, server in servers.items() if not isinstance(server, str)}
        held.callback(stack.listeners.close)
        held.callback(stack.stop_all)
        _start_services(stack, policy_required, ready_timeout_s, note)
        if chosen:
            settle(chosen, stack.listening())
            record(state_dir, chosen)
        yield stack


def _start_services(stack: Stack, policy_required: bool, timeout_s: float, note: Note | None) -> None:
    """Start the registry (it provisions the bus), then the other services; wait until each serves.

    Then each configured MCP server is awaited until it has left ``starting``, at most until
    the same deadline; those still starting are kept in ``stack.mcp_starting``.

    Raises:
        RuntimeError / TimeoutError: a service did not come up.
    """
    stack.start("registry")
    asyncio.run(wait_ready(stack, ("registry",), timeout_s, note=note))
    services = (*SERVICES[1:], CHATOPS) if stack.env.get("TOOLGATE_CHATOPS_PLATFORM") else SERVICES[1:]
    since = datetime.now(UTC)
    for service in services:
        stack.start(service)
    ready = wait_ready(stack, services, timeout_s, policy_required=policy_required, note=note, mcp_since=since)
    stack.mcp_starting = asyncio.run(ready)
