"""A service's health and metrics over HTTP: ``/livez``, ``/readyz``, ``/metrics`` (aiohttp).

The server runs in the service's own event loop, so ``/livez`` answering means the loop
runs. ``/readyz`` asks every readiness check (:data:`ReadyCheck`) and answers 200, or 503
with a JSON body naming each check that is not ready and why; a check that raises is not
ready (fail closed). ``/metrics`` is the Prometheus text of the service's registry.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from effectgate.contracts.errors import described
from effectgate.shared.config.settings import ServiceSettings

__all__ = ["HealthServer", "Monitoring", "ReadyCheck", "monitoring", "not_ready"]

log = logging.getLogger("effectgate")

ReadyCheck = Callable[[], str | None]
"""A readiness check: ``None`` when ready, else what is not ready (one short sentence)."""


@dataclass(frozen=True)
class Monitoring:
    """Where a service serves its health and metrics.

    Attributes:
        service: the service's name (``policy``…), its ``service.name`` is ``effectgate-<service>``.
        host: the address to listen on.
        port: the TCP port, ``None`` for no HTTP server (metrics are still recorded).
        otlp_endpoint: OTLP/HTTP base URL metrics are also pushed to, or ``None``.
        socket_fd: a listening socket inherited from the starting process, served instead of
            binding ``host:port``; ``None``: bind.
    """

    service: str
    host: str = "127.0.0.1"
    port: int | None = None
    otlp_endpoint: str | None = None
    socket_fd: int | None = None

    @property
    def serves(self) -> bool:
        """Whether there is an HTTP server (a port to bind, or a socket to serve)."""
        return self.port is not None or self.socket_fd is not None


def monitoring(service: str, settings: ServiceSettings) -> Monitoring:
    """The :class:`Monitoring` of ``service`` from its settings (``http_host``, ``http_port``, ``http_socket_fd``)."""
    return Monitoring(service, settings.http_host, settings.http_port, settings.otlp_endpoint, settings.http_socket_fd)


def not_ready(checks: Mapping[str, ReadyCheck]) -> dict[str, str]:
    """Each check that is not ready → why; ``{}`` when all are ready. A check that raises is not ready."""
    found = {}
    for name, check in checks.items():
        try:
            reason = check()
        except Exception as error:  # a broken check must not read as ready
            reason = f"the check failed: {type(error).__name__}: {described(error)}"
        if reason is not None:
            found[name] = reason
    return found


class HealthServer:
    """The HTTP server of ``/livez``, ``/readyz`` and ``/metrics``.

    Args:
        host: address to listen on.
        port: TCP port (0: any free port; :attr:`port` tells which).
        checks: readiness checks by name (read at each request; the mapping may grow).
        registry: the registry ``/metrics`` serves.
        sock: a listening socket to serve instead of binding ``host:port`` (inherited, bound first).
    """

    def __init__(
        self,
        host: str,
        port: int,
        checks: Mapping[str, ReadyCheck],
        registry: CollectorRegistry,
        sock: socket.socket | None = None,
    ) -> None:
        self._host, self._port, self._checks, self._registry, self._sock = host, port, checks, registry, sock
        app = web.Application()
        app.router.add_get("/livez", self._livez)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        self.port = port

    async def start(self) -> None:
        """Listen.

        Raises:
            OSError: the address is in use or cannot be bound (the message names it).
        """
        await self._runner.setup()
        site: web.BaseSite = (
            web.SockSite(self._runner, self._sock) if self._sock else web.TCPSite(self._runner, self._host, self._port)
        )
        try:
            await site.start()
        except OSError as error:
            await self._runner.cleanup()
            raise OSError(error.errno, f"health and metrics on {self._host}:{self._port}: {error.strerror}") from error
        self.port = self._runner.addresses[0][1]
        log.info("health and metrics on http://%s:%s (/livez /readyz /metrics)", self._host, self.port)

    async def stop(self) -> None:
        """Stop listening and close open connections."""
        await self._runner.cleanup()

    async def _livez(self, _request: web.Request) -> web.Response:
        return web.json_response({"live": True})

    async def _readyz(self, _request: web.Request) -> web.Response:
        missing = not_ready(self._checks)
        return web.json_response({"ready": not missing, "not_ready": missing}, status=503 if missing else 200)

    async def _metrics(self, _request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
