"""The ports ``effectgate up`` listens on: the same ones every start, recorded in ``<state>/ports.json``.

Each port is its default when free, else the one recorded by the last start when free,
else a free one; the choice is recorded for the next start. A port found taken is
reported (:attr:`Ports.notes`), never a reason to fail.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DEFAULT_PORTS", "SERVICE_PORTS", "Ports", "http_port_env", "record", "settle", "stable_ports"]

SERVICE_PORTS = {"registry": 9471, "policy": 9472, "approvals": 9473, "executor": 9474, "audit": 9475, "chatops": 9476}
"""Each service's health and metrics HTTP port (``EFFECTGATE_<SERVICE>_HTTP_PORT``)."""

DEFAULT_PORTS = {"nats": 4222, "nats-monitoring": 8222, "redis": 6379, **SERVICE_PORTS}
"""What ``up`` listens on when the port is free: NATS client and monitoring, Redis, the services' HTTP."""


@dataclass
class Ports:
    """The chosen ports by name (keys of :data:`DEFAULT_PORTS`) and what was taken on the way.

    Attributes:
        chosen: name → TCP port on 127.0.0.1.
        notes: one line per port that could not be its default or its recorded one.
        moved: one line per chosen port taken before it was bound (and replaced by :func:`settle`).
    """

    chosen: dict[str, int]
    notes: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)


def stable_ports(state_dir: Path, defaults: dict[str, int] = DEFAULT_PORTS) -> Ports:
    """Choose every port of ``defaults`` (default, else recorded, else free) and record the choice.

    Args:
        state_dir: holds ``ports.json``, read and then rewritten.
        defaults: name → preferred port.

    Returns:
        The choice, with a note for each port taken (and for an unreadable ``ports.json``).
    """
    record_file = state_dir / "ports.json"
    recorded, notes = _recorded(record_file)
    ports = Ports({}, notes)
    for name, default in defaults.items():
        ports.chosen[name] = _choose(name, (default, recorded.get(name)), set(ports.chosen.values()), ports.notes)
    state_dir.mkdir(parents=True, exist_ok=True)
    record_file.write_text(json.dumps(ports.chosen, indent=2) + "\n")
    return ports


def settle(ports: Ports, listening: dict[str, int]) -> None:
    """Make ``ports.chosen`` the ports listened on (``listening``: name → port); a line in ``moved`` for each change."""
    for name, port in listening.items():
        if name in ports.chosen and ports.chosen[name] != port:
            ports.moved.append(f"{name}: port {ports.chosen[name]} was taken before it was bound; listening on {port}")
        ports.chosen[name] = port


def record(state_dir: Path, ports: Ports) -> None:
    """Write ``ports.chosen`` to ``<state_dir>/ports.json``: the ports the next start prefers."""
    (state_dir / "ports.json").write_text(json.dumps(ports.chosen, indent=2) + "\n")


def http_port_env(ports: Ports) -> dict[str, str]:
    """``EFFECTGATE_<SERVICE>_HTTP_PORT`` of every service, for the services' environment."""
    return {f"EFFECTGATE_{name.upper()}_HTTP_PORT": str(ports.chosen[name]) for name in SERVICE_PORTS}


def _choose(name: str, preferred: tuple[int, int | None], used: set[int], notes: list[str]) -> int:
    """The first free port of ``preferred`` not in ``used``, else a free one; a note for each one taken (here too)."""
    for port in dict.fromkeys(preferred):
        if port is None:
            continue
        if port not in used and _free(port):
            return port
        notes.append(f"{name}: port {port} is taken")
    port = _any_free(used)
    notes.append(f"{name}: listening on {port} instead (recorded for the next start)")
    return port


def _recorded(record: Path) -> tuple[dict[str, int], list[str]]:
    """The ports the last start recorded; none (and a note) when the file is missing or unreadable."""
    if not record.exists():
        return {}, []
    try:
        found = json.loads(record.read_text())
        return {str(k): v for k, v in found.items() if isinstance(v, int) and 0 < v < 65536}, []
    except (ValueError, AttributeError, OSError) as error:
        return {}, [f"{record} unreadable ({error}); ports chosen afresh"]


def _free(port: int) -> bool:
    """Whether 127.0.0.1:``port`` can be listened on now (``SO_REUSEADDR``, as the servers bind)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _any_free(used: set[int]) -> int:
    """A port the kernel hands out as free, other than those in ``used``."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in used:
            return port
