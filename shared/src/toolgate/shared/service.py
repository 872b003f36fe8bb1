"""Building a FastStream service whose runtime is assembled after connecting."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from faststream import FastStream
from faststream.nats import NatsBroker
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from nats.js import JetStreamContext

from toolgate.shared.settings import ServiceSettings
from toolgate.shared.telemetry import tracer_provider

__all__ = ["RuntimeCell", "new_broker", "new_app"]

R = TypeVar("R")


class RuntimeCell(Generic[R]):
    """Holds a service's runtime once built; handlers read it per message."""

    def __init__(self) -> None:
        self._value: R | None = None

    def set(self, value: R) -> None:
        """Store the runtime."""
        self._value = value

    def __call__(self) -> R:
        """Return the runtime.

        Raises:
            RuntimeError: the service has not finished starting (the message is retried).
        """
        if self._value is None:
            raise RuntimeError("service not started")
        return self._value


class _IdleFetchTimeout(logging.Filter):
    """Drops FastStream's report of an idle pull fetch that timed out.

    nats-py (2.16) raises a plain ``TimeoutError`` from ``fetch`` when a pull request
    expires with nothing to deliver; FastStream (0.7) expects ``nats.errors.TimeoutError``,
    so its supervisor logs an ERROR with a traceback and restarts the fetch loop. Nothing is
    lost; only that record is dropped, every other error still shows.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if type(error) is not TimeoutError or error.__traceback__ is None:
            return True
        frames = traceback.extract_tb(error.__traceback__)
        return not any(frame.name == "_fetch_n" for frame in frames)


def new_broker(service: str, settings: ServiceSettings) -> NatsBroker:
    """A NATS broker with a bounded graceful shutdown (10 s), traced when OTLP export is configured.

    Without an endpoint no span is created at all: spans nobody exports cost every
    message its CPU time and nothing else.
    """
    middlewares = []
    if settings.otlp_endpoint:
        provider = tracer_provider(service, settings.otlp_endpoint)
        middlewares.append(NatsTelemetryMiddleware(tracer_provider=provider))
    logging.getLogger("faststream.access.nats").addFilter(_IdleFetchTimeout())
    return NatsBroker(
        settings.nats_url,
        graceful_timeout=10.0,
        middlewares=middlewares,
        max_reconnect_attempts=-1,
        log_level=logging.DEBUG,  # per-message "Received/Processed" lines; service events log at INFO
    )


def new_app(broker: NatsBroker, build: Callable[[JetStreamContext], Awaitable[None]]) -> FastStream:
    """A FastStream app that connects, runs ``build(js)``, then starts consuming."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    app = FastStream(broker)

    @app.on_startup
    async def connect() -> None:
        await broker.connect()
        await build(broker.connection.jetstream())

    return app
