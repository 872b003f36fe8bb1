"""The listening sockets a local stack hands its services: bound first, so no port is lost on the way.

A port chosen free and bound later by the service can be taken in between by another program
(another stack on the machine, an outgoing connection's local port).
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass, field

__all__ = ["LISTENERS", "Listener", "Listeners"]


@dataclass(frozen=True)
class Listener:
    """One port a service listens on.

    Attributes:
        port_variable: the setting naming the port (its presence in the environment asks for it).
        socket_variable: the setting handing the bound socket down (its file descriptor).
        host_variable: the setting naming the address (default ``127.0.0.1``).
        movable: a taken port may be replaced by a free one.
    """

    port_variable: str
    socket_variable: str
    host_variable: str
    movable: bool = True


def _health(service: str) -> Listener:
    prefix = f"EFFECTGATE_{service.upper()}_HTTP"
    return Listener(f"{prefix}_PORT", f"{prefix}_SOCKET_FD", f"{prefix}_HOST")


LISTENERS: dict[str, tuple[Listener, ...]] = {
    **{name: (_health(name),) for name in ("registry", "policy", "approvals", "executor", "audit")},
    "chatops": (
        _health("chatops"),
        Listener(
            "EFFECTGATE_CHATOPS_SLACK_PORT",
            "EFFECTGATE_CHATOPS_SLACK_SOCKET_FD",
            "EFFECTGATE_CHATOPS_SLACK_HOST",
            False,
        ),
    ),
}
"""The ports of each service, by service."""


@dataclass
class Listeners:
    """The sockets bound for a stack's processes, by ``(process name, port variable)``."""

    sockets: dict[tuple[str, str], socket.socket] = field(default_factory=dict)

    def handed(self, service: str, name: str, env: dict[str, str]) -> tuple[dict[str, str], tuple[int, ...]]:
        """The settings and file descriptors that hand process ``name`` (of ``service``) its sockets.

        A replica (``name`` other than ``service``) gets ports of its own.

        Raises:
            OSError: a port that may not move is taken (the message names it and its setting).
        """
        settings: dict[str, str] = {}
        fds: list[int] = []
        for listener in (one for one in LISTENERS.get(service, ()) if one.port_variable in env):
            wanted = int(env[listener.port_variable]) if name == service else 0
            sock = self._socket(name, listener, env.get(listener.host_variable) or "127.0.0.1", wanted)
            settings[listener.port_variable] = str(sock.getsockname()[1])
            settings[listener.socket_variable] = str(sock.fileno())
            fds.append(sock.fileno())
        return settings, tuple(fds)

    def port(self, name: str, variable: str) -> int | None:
        """The port process ``name`` got for ``variable``, ``None`` when it got none."""
        sock = self.sockets.get((name, variable))
        return int(sock.getsockname()[1]) if sock else None

    def close(self) -> None:
        """Close every socket (the stack stopped)."""
        for sock in self.sockets.values():
            sock.close()
        self.sockets.clear()

    def _socket(self, name: str, listener: Listener, host: str, wanted: int) -> socket.socket:
        key = (name, listener.port_variable)
        if key not in self.sockets:
            self.sockets[key] = _bound(name, listener, host, wanted)
        return self.sockets[key]


def _bound(name: str, listener: Listener, host: str, wanted: int) -> socket.socket:
    """A socket listening on ``host:wanted``, or on a free port when that is taken and the listener may move."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, wanted))
    except OSError as error:
        if not (listener.movable and error.errno == errno.EADDRINUSE):
            sock.close()
            raise OSError(
                error.errno, f"{name}: {host}:{wanted} ({listener.port_variable}): {error.strerror}"
            ) from None
        sock.bind((host, 0))
    sock.listen(128)
    return sock
