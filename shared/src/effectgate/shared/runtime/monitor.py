"""Health, readiness and sampled gauges of a service, hooked into its FastStream app.

:func:`monitor` adds to the app: the meter provider and the HTTP server
(:class:`~effectgate.shared.runtime.health.HealthServer`, started before NATS is connected so
``/readyz`` can say it is not), and once connected the
:class:`~effectgate.shared.runtime.sampling.Sampler` of the gauges that need I/O.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING

from faststream import FastStream
from faststream.exceptions import IncorrectState
from faststream.nats import NatsBroker

from effectgate.shared.consumer.worker import DurableWorker
from effectgate.shared.runtime.broker import jetstream_of
from effectgate.shared.runtime.health import HealthServer, Monitoring, ReadyCheck, not_ready
from effectgate.shared.runtime.metrics import install_meter_provider
from effectgate.shared.runtime.nats_watch import ConnectionWatch
from effectgate.shared.runtime.sampling import Sampler, consumer_pending

if TYPE_CHECKING:
    from effectgate.shared.runtime.assembly import Lifecycle

__all__ = ["base_checks", "monitor"]


def base_checks(
    broker: NatsBroker,
    plan: Lifecycle,
    workers: Sequence[DurableWorker],
    started: asyncio.Event,
    watch: ConnectionWatch | None = None,
) -> dict[str, ReadyCheck]:
    """The readiness checks every service has: ``nats`` and ``consumers``, then the service's own.

    ``nats`` is not ready unless the client is connected, and while ``watch`` (when given)
    says the connection is not (reconnecting, refused, closed: its last error is named).
    """

    def nats() -> str | None:
        if watch is not None and (why := watch.not_ready()):
            return why
        try:
            connected = broker.connection.is_connected
        except IncorrectState:
            connected = False
        return None if connected else "not connected to NATS"

    def consumers() -> str | None:
        if not started.is_set() and not plan.consumers:
            return "starting: connecting and building"
        if not started.is_set():
            return f"starting: {len(workers)} of {len(plan.consumers)} durable consumers bound"
        return None

    return {"nats": nats, "consumers": consumers, **plan.ready_checks}


def _inherited(where: Monitoring) -> socket.socket | None:
    """The listening socket handed down to the service (``http_socket_fd``), or ``None``."""
    return socket.socket(fileno=where.socket_fd) if where.socket_fd is not None else None


def monitor(
    app: FastStream,
    broker: NatsBroker,
    plan: Lifecycle,
    workers: Sequence[DurableWorker],
    watch: ConnectionWatch | None = None,
) -> asyncio.Event:
    """Hook health, readiness and metrics into ``app``; return the event to set once the service started.

    Does nothing but return the event when ``plan.monitoring`` is ``None``.
    """
    started = asyncio.Event()
    if plan.monitoring is None:
        return started
    where = plan.monitoring
    registry = install_meter_provider(where.service, where.otlp_endpoint)
    checks = base_checks(broker, plan, workers, started, watch)
    server = HealthServer(where.host, where.port or 0, checks, registry, _inherited(where)) if where.serves else None
    durables = [consumer.spec.durable for consumer in plan.consumers]
    sampler: list[Sampler] = []

    @app.on_startup
    async def serve() -> None:
        not_ready(checks)  # asked once now: a check that samples in the background (Redis) starts at once
        if server is not None:
            await server.start()

    @app.after_startup
    async def sample() -> None:
        probes = [consumer_pending(jetstream_of(broker), durables), *plan.probes]
        sampler.append(Sampler(probes))
        sampler[0].start()

    @app.after_shutdown
    async def stop() -> None:
        for running in sampler:
            await running.stop()
        if server is not None:
            await server.stop()

    return started
