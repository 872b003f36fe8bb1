"""Building a service: FastStream for its lifecycle and request/reply, durable workers for its stream.

Start: connect, build the runtime (``build(js)``), start one :class:`DurableWorker` per
:class:`Consumer`. Stop (SIGTERM/SIGINT, FastStream's ``on_shutdown``): every worker stops
fetching and drains within ``grace_s`` (then ``abort`` ends what still runs); only after
that does FastStream close the connection, and only then are the ``closers`` run (MCP
sessions), so nothing an in-flight handler still needs is closed under it. A stop that
comes while the service is still starting is an orderly stop too: a closer of a runtime
never built (:class:`NotStarted`) has nothing to close and is passed over, the others run,
and the service logs ``stopped before it finished starting`` and exits 0.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import msgspec
from faststream import FastStream
from faststream.nats import NatsBroker, NatsMessage, NatsRouter
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from faststream.nats.security import NatsSecurity
from nats.js import JetStreamContext

from toolgate.contracts.errors import Problem, ToolgateError
from toolgate.shared import tracing
from toolgate.shared.connections import tls_options, warn_if_open
from toolgate.shared.handling import Consumer, DurableWorker
from toolgate.shared.health import Monitoring, ReadyCheck
from toolgate.shared.logs import configure_logging
from toolgate.shared.monitor import monitor
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.request_log import request_scope
from toolgate.shared.sampling import Probe
from toolgate.shared.settings import ServiceSettings
from toolgate.shared.telemetry import tracer_provider

__all__ = [
    "Lifecycle",
    "NotStarted",
    "RuntimeCell",
    "is_inbox",
    "max_payload_of",
    "new_app",
    "new_broker",
    "raw_body",
    "rpc",
    "run_service",
]

log = logging.getLogger("toolgate")

Answer = Callable[[NatsMessage], Awaitable[bytes]]

R = TypeVar("R")


class NotStarted(Problem, RuntimeError):
    """A service's runtime was read before it was built (a message retried; a closer with nothing to close)."""


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
            NotStarted: the service has not finished starting (the message is retried).
        """
        if self._value is None:
            raise NotStarted("service not started")
        return self._value


async def raw_body(msg: NatsMessage) -> bytes:
    """FastStream decoder that keeps a request/reply body as bytes.

    The services decode bodies themselves (``decode_untrusted``), so a hostile body (not
    JSON, nested too deeply) reaches the handler and ends in a refusal instead of failing
    inside the framework.
    """
    return bytes(msg.body)


def is_inbox(subject: str) -> bool:
    """Whether ``subject`` is a request inbox (``_INBOX.…`` or a private ``_INBOX_<user>.…``)."""
    return subject.startswith(("_INBOX.", "_INBOX_"))


def fitted(body: bytes, max_payload: int, subject: str) -> bytes:
    """``body``, or a ``reply_too_large`` refusal (``ok``, ``reason_code``, ``reason``) when NATS would not carry it.

    Every answer shape has ``ok``, ``reason_code`` and ``reason``; an answer larger than the
    connection's ``max_payload`` (bytes) would otherwise raise in the responder and leave the
    requester waiting for nothing.
    """
    if len(body) <= max_payload - _REPLY_HEADROOM_BYTES:
        return body
    reason = f"the answer on {subject} is {len(body)} bytes; NATS carries at most {max_payload}: ask for less"
    log.warning("%s", reason)
    return msgspec.json.encode({"ok": False, "reason_code": "reply_too_large", "reason": reason})


_REPLY_HEADROOM_BYTES = 1024
"""Room left in ``max_payload`` for the reply's protocol headers, bytes."""


def max_payload_of(msg: NatsMessage) -> int:
    """The ``max_payload`` (bytes) of the connection a request came on: what its answer may weigh."""
    return int(msg.raw_message._client.max_payload)  # nats-py's Msg keeps its client


def rpc(router: NatsRouter, subject: str, queue: str) -> Callable[[Answer], Answer]:
    """Register a request/reply handler that answers only to a request inbox.

    A requester names the reply subject itself; a service that answered anywhere would
    publish there with its own rights (e.g. the registry into the tools bucket). So a
    request whose reply subject is not an inbox gets no answer, and a warning is logged.
    The handler receives the raw message and returns the reply's bytes; it runs in a
    :func:`~toolgate.shared.request_log.request_scope` (what it notes is one log line with
    ``method``, the subject).
    """

    def register(answer: Answer) -> Answer:
        async def on_request(msg: NatsMessage) -> None:
            reply_to = msg.raw_message.reply
            if not reply_to or not is_inbox(reply_to):
                log.warning("request on %s asked for its answer on %r, not an inbox: not answered", subject, reply_to)
                return
            with request_scope(method=subject):
                await msg.raw_message.respond(fitted(await answer(msg), max_payload_of(msg), subject))

        router.subscriber(subject, queue=queue, decoder=raw_body, no_reply=True, include_in_schema=False)(on_request)
        return answer

    return register


def new_broker(
    service: str, settings: ServiceSettings, reporter: SecurityReporter | None = None, inbox_prefix: str = "_INBOX"
) -> NatsBroker:
    """A NATS broker with a bounded graceful shutdown (10 s), traced when OTLP export is configured.

    Without an endpoint no span is created at all: spans nobody exports cost every
    message its CPU time and nothing else. With a ``reporter``, every NATS permissions
    violation on the connection is reported as a security event. ``inbox_prefix``: the
    reply prefix (a private ``_INBOX_<user>`` for a service that must not read others' replies).

    The broker logs through ``toolgate.bus`` (its per-message lines are DEBUG); the process's
    logging is configured by the service's ``__main__`` (:func:`~toolgate.shared.logs.configure_logging`).
    """
    middlewares = []
    if settings.otlp_endpoint:
        provider = tracer_provider(service, settings.otlp_endpoint)
        tracing.enable(provider)
        middlewares.append(NatsTelemetryMiddleware(tracer_provider=provider))
    return NatsBroker(
        settings.nats_url,
        security=_security(settings),
        graceful_timeout=10.0,
        middlewares=middlewares,
        max_reconnect_attempts=-1,
        error_cb=reporter.on_error if reporter else None,
        inbox_prefix=inbox_prefix,
        logger=logging.getLogger("toolgate.bus"),
        log_level=logging.DEBUG,  # per-message "Received/Processed" lines; one request line per message at INFO
    )


def _security(settings: ServiceSettings) -> NatsSecurity | None:
    """TLS from the first byte, verified with ``TOOLGATE_NATS_CA_FILE`` (see :func:`tls_options`); else none."""
    options = tls_options(settings.nats_ca_file)
    return NatsSecurity(ssl_context=options["tls"], tls_handshake_first=True) if options else None


@dataclass
class Lifecycle:
    """What a service runs besides FastStream's own subscribers.

    Attributes:
        consumers: durable consumers, each served by a :class:`DurableWorker`.
        grace_s: seconds in-flight handlers get to finish at shutdown.
        abort: called when the grace period ends with handlers still running.
        closers: awaited after the connection is closed (in order); one that raises
            :class:`NotStarted` (its runtime was never built: stopped while starting) is passed over.
        reporter: the service's security reporter, attached to the stream once connected.
        monitoring: where health and metrics are served (``None``: no HTTP server, no meter provider).
        ready_checks: the service's own readiness checks, by name (besides NATS and its consumers).
        probes: readers of the service's sampled gauges (:mod:`toolgate.shared.sampling`).
    """

    consumers: Sequence[Consumer] = ()
    grace_s: float = 10.0
    abort: Callable[[], None] | None = None
    closers: Sequence[Callable[[], Awaitable[None]]] = ()
    reporter: SecurityReporter | None = None
    monitoring: Monitoring | None = None
    ready_checks: Mapping[str, ReadyCheck] = field(default_factory=dict)
    probes: Sequence[Probe] = ()


def new_app(
    broker: NatsBroker, build: Callable[[JetStreamContext], Awaitable[None]], lifecycle: Lifecycle | None = None
) -> FastStream:
    """A FastStream app that connects, runs ``build(js)``, then starts the lifecycle's workers.

    FastStream's own start and stop lines are replaced by one ``started`` and one ``stopped`` line.
    """
    app, plan, workers = FastStream(broker, logger=None), lifecycle or Lifecycle(), list[DurableWorker]()
    started = monitor(app, broker, plan, workers)

    @app.on_startup
    async def connect() -> None:
        await broker.connect()
        warn_if_open(broker.connection, log)
        js = broker.connection.jetstream()
        if plan.reporter:
            plan.reporter.attach(js)
        await build(js)
        for consumer in plan.consumers:
            worker = DurableWorker(broker.connection, consumer)
            await worker.start()
            workers.append(worker)
        started.set()

    @app.after_startup
    async def announce_start() -> None:
        log.info("started", extra={"consumers": len(workers)})

    @app.on_shutdown
    async def drain() -> None:
        await asyncio.gather(*(worker.stop(plan.grace_s, plan.abort) for worker in workers))
        if plan.reporter:
            await plan.reporter.flush()

    @app.after_shutdown
    async def close() -> None:
        for closer in plan.closers:
            try:
                await closer()
            except NotStarted:  # stopped while starting: what it closes was never built
                continue
        log.info("stopped" if started.is_set() else "stopped before it finished starting")

    return app


def run_service(service: str, create_app: Callable[[], FastStream]) -> int:
    """Run one service process: configure logging first, then build the app and run it until stopped.

    An error that ends the service (at start or later) is logged as one CRITICAL record
    naming it, with its traceback, in the configured format (never the interpreter's raw
    traceback). A log setting it does not know ends it at once with one line on stderr.

    Returns:
        The exit code: 0 when stopped, 1 when an error ended it, 2 for an unknown log setting.
    """
    try:
        configure_logging(service)  # first: what the service logs while it is built is formatted too
    except ToolgateError as error:
        print(f"{service} cannot start: {error.reason}", file=sys.stderr)
        return 2
    try:
        asyncio.run(create_app().run())
    except Exception as error:
        log.critical("%s stopped by an error: %s", service, error, exc_info=True)
        return 1
    return 0
