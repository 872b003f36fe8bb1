"""A running system: its URLs, the environment its services got, and their processes.

:func:`~effectgate.cli.stack.launch.running_stack` makes one; a :class:`Stack` starts, stops
and inspects the service processes (each as its own NATS user when the bus is ``secured``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from effectgate.cli.stack.credentials import BusCredentials
from effectgate.cli.stack.listeners import Listeners
from effectgate.cli.stack.ports import Ports
from effectgate.cli.stack.workers import WORKER
from effectgate.contracts.bus.nats_credentials import split_servers
from effectgate.contracts.bus.nats_permissions import worker_user
from effectgate.devstack.cluster import NatsCluster
from effectgate.devstack.processes import end, owned, signal_group
from effectgate.devstack.sentinels import SentinelGroup
from effectgate.devstack.servers import ServerProcess
from effectgate.shared.config.keyring import PUBLIC
from effectgate.shared.config.settings import NATS_IDENTITY_ENV

__all__ = ["Stack"]


@dataclass
class Stack:
    """A running system: URLs, the environment the services got, their processes.

    Attributes:
        nats_url: the server's URL, or the cluster's server list (comma-separated), without credentials.
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
    """The ports chosen by ``up`` (:mod:`effectgate.cli.stack.ports`), then those listened on; ``None``: free ones."""
    listeners: Listeners = field(default_factory=Listeners)
    """The sockets bound for the services' ports and handed down (:mod:`effectgate.cli.stack.listeners`)."""
    mcp_starting: list[str] = field(default_factory=list)
    """The MCP servers still starting when the start's wait ended (listed ``starting``; the stack runs on)."""
    cluster: NatsCluster | None = None
    """The NATS cluster started for this stack (``up --cluster``); its nodes are also in :attr:`servers`."""
    sentinels: SentinelGroup | None = None
    """The Redis primary, replica and Sentinels started with a cluster; also in :attr:`servers`."""
    services: dict[str, str] = field(default_factory=dict)
    """Process name to the service it runs (``policy-2`` → ``policy``; ``worker-<name>`` → ``worker``)."""
    workers: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Tool worker process name (``worker-<name>``) to its name and the module it serves, for every worker started."""

    @property
    def nats_servers(self) -> list[str]:
        """The NATS server URLs, in order (one, or every node of the cluster)."""
        return split_servers(self.nats_url)

    def service_of(self, name: str) -> str:
        """The service process ``name`` runs (``name`` itself when it was never started)."""
        return self.services.get(name, name)

    def replicas(self, service: str) -> list[str]:
        """The names of the running processes of ``service``, in start order."""
        return [name for name in self.processes if self.service_of(name) == service]

    def has_user(self, user: str) -> bool:
        """Whether the NATS server knows ``user`` (``False`` for every user when ``open``)."""
        return self.credentials is not None and user in self.credentials.passwords

    def url_for(self, user: str) -> str:
        """The NATS URL ``user`` connects with: its credentials in it when ``secured``.

        Raises:
            KeyError: ``secured`` and no such user.
        """
        return self.credentials.url(self.nats_url, user) if self.credentials else self.nats_url

    def nats_env(self, user: str) -> dict[str, str]:
        """The NATS environment of a process that connects as ``user``: the server, and its credentials as options.

        ``NATS_URL`` carries no credentials (nats-py would send them to that server only); when
        ``secured``, ``EFFECTGATE_NATS_USER`` and ``EFFECTGATE_NATS_PASSWORD`` reach every server.
        When ``open``, those settings are emptied (none inherited from the shell applies).

        Raises:
            KeyError: ``secured`` and no such user.
        """
        if not self.credentials:
            return {"NATS_URL": self.nats_url, **dict.fromkeys(NATS_IDENTITY_ENV, "")}
        own = {"EFFECTGATE_NATS_USER": user, "EFFECTGATE_NATS_PASSWORD": self.credentials.passwords[user]}
        return {"NATS_URL": self.nats_url, **dict.fromkeys(NATS_IDENTITY_ENV, ""), **own}

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
        bound here first and handed down (:mod:`effectgate.cli.stack.listeners`); a restart gets the same.

        Raises:
            OSError: a port that may not move is taken.
        """
        logs, name = self.state_dir / "logs", name or service
        self.services[name] = service
        logs.mkdir(parents=True, exist_ok=True)
        handed, fds = self.listeners.handed(service, name, self.env)
        own = {**self.nats_env(service), "EFFECTGATE_KEYS_DIR": str(self.keys_dir(service))}
        with (logs / f"{name}.log").open("ab") as sink:
            self.processes[name] = subprocess.Popen(
                [sys.executable, "-m", f"effectgate.{service}"],
                env={**self.env, **handed, **own},
                stdout=sink,
                stderr=subprocess.STDOUT,
                pass_fds=fds,
                **owned(),
            )

    def start_worker(self, name: str, module: str) -> None:
        """Start worker ``name`` serving ``module`` as NATS user ``worker-<name>`` (log ``logs/worker-<name>.log``).

        It verifies calls with the stack's public keys (``EFFECTGATE_PUBLIC_KEYS_DIR``); a restart
        (:meth:`restart`) starts it the same way.
        """
        process, logs = worker_user(name), self.state_dir / "logs"
        self.services[process], self.workers[process] = WORKER, (name, module)
        logs.mkdir(parents=True, exist_ok=True)
        own = {**self.nats_env(process), "EFFECTGATE_PUBLIC_KEYS_DIR": str(self.public_keys)}
        with (logs / f"{process}.log").open("ab") as sink:
            self.processes[process] = subprocess.Popen(
                [sys.executable, "-m", "effectgate.tools.serving", module, "--name", name],
                env={**self.env, **own},
                stdout=sink,
                stderr=subprocess.STDOUT,
                **owned(),
            )

    def restart(self, name: str) -> None:
        """Start process ``name`` again as it was started: a service replica, or a tool worker."""
        if self.service_of(name) == WORKER:
            self.start_worker(*self.workers[name])
        else:
            self.start(self.service_of(name), name)

    def http_port(self, name: str, service: str | None = None) -> int | None:
        """The health and metrics port of process ``name`` (of ``service``, default ``name``); ``None``: none."""
        return self.listeners.port(name, f"EFFECTGATE_{(service or name).upper()}_HTTP_PORT")

    def listening(self) -> dict[str, int]:
        """Every port by its :data:`~effectgate.cli.stack.ports.DEFAULT_PORTS` name: servers' and services' HTTP."""
        single = self.servers.values() if self.cluster is None else ()
        found = {name: port for server in single for name, port in server.ports.items()}
        return found | {name: port for name in self.processes if (port := self.http_port(name)) is not None}

    def keys_dir(self, holder: str) -> Path:
        """The keys directory of ``holder``: a service, ``operator`` or ``public`` (see the keyring)."""
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
