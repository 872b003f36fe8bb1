"""Building a service: FastStream for its lifecycle and request/reply, durable workers for its stream.

Start: connect, build the runtime (``build(js)``), start one :class:`DurableWorker` per
:class:`Consumer`.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

import msgspec
from faststream import FastStream
from faststream.nats import NatsBroker, NatsMessage, NatsRouter
from nats.js import JetStreamContext

from effectgate.contracts.errors import EffectgateError, Problem
from effectgate.shared.consumer.consumers import Consumer
from effectgate.shared.consumer.request_log import request_scope
from effectgate.shared.consumer.worker import DurableWorker
from effectgate.shared.runtime.broker import ServiceBroker, api_prefix_of, jetstream_of, new_broker
from effectgate.shared.runtime.connections import warn_if_open
from effectgate.shared.runtime.health import Monitoring, ReadyCheck
from effectgate.shared.runtime.logs import configure_logging
from effectgate.shared.runtime.monitor import monitor
from effectgate.shared.runtime.nats_watch import ConnectionLost, ConnectionWatch
from effectgate.shared.runtime.reporting import SecurityReporter
from effectgate.shared.runtime.sampling import Probe

__all__ = [
    "Lifecycle",
    "NotStarted",
    "Reply",
    "RuntimeCell",
    "ServiceBroker",
    "is_inbox",
    "max_payload_of",
    "new_app",
    "new_broker",
    "raw_body",
    "rpc",
    "run_service",
]

log = logging.getLogger("effectgate")


class Reply(NamedTuple):
    """An answer sent with headers of its own, as it is: its handler fitted it to ``max_payload``.

    Attributes:
        body: the answer's bytes.
        headers: its headers (none of the request's are echoed).
    """

    body: bytes
    headers: dict[str, str]


Answer = Callable[[NatsMessage], Awaitable[bytes | Reply]]

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
    """Whether ``subject`` is a request inbox: ``_INBOX.…``, a private ``_INBOX_<user>.…``, or ``_R_.…``.

    ``_R_.…`` is what nats-server makes of the inbox of a requester in another account (an agent's,
    an approver's): the answer goes back to that account only.
    """
    return subject.startswith(("_INBOX.", "_INBOX_", "_R_."))


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
    The handler receives the raw message and returns the reply's bytes (fitted: :func:`fitted`),
    or a :class:`Reply` sent as it is; it runs in a
    :func:`~effectgate.shared.consumer.request_log.request_scope` (what it notes is one log line with
    ``method``, the subject).
    """

    def register(answer: Answer) -> Answer:
        async def on_request(msg: NatsMessage) -> None:
            reply_to = msg.raw_message.reply
            if not reply_to or not is_inbox(reply_to):
                log.warning("request on %s asked for its answer on %r, not an inbox: not answered", subject, reply_to)
                return
            with request_scope(method=subject):
                answered = await answer(msg)
                if isinstance(answered, Reply):
                    await msg.raw_message._client.publish(reply_to, answered.body, headers=answered.headers)
                else:
                    await msg.raw_message.respond(fitted(answered, max_payload_of(msg), subject))

        router.subscriber(subject, queue=queue, decoder=raw_body, no_reply=True, include_in_schema=False)(on_request)
        return answer

    return register


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
        probes: readers of the service's sampled gauges (:mod:`effectgate.shared.runtime.sampling`).
        fair_window: messages a consumer served fair by principal fetches ahead
            (:class:`DurableWorker`); 0: every consumer in stream order.
    """

    consumers: Sequence[Consumer] = ()
    grace_s: float = 10.0
    abort: Callable[[], None] | None = None
    closers: Sequence[Callable[[], Awaitable[None]]] = ()
    reporter: SecurityReporter | None = None
    monitoring: Monitoring | None = None
    ready_checks: Mapping[str, ReadyCheck] = field(default_factory=dict)
    probes: Sequence[Probe] = ()
    fair_window: int = 0


def new_app(
    broker: NatsBroker, build: Callable[[JetStreamContext], Awaitable[None]], lifecycle: Lifecycle | None = None
) -> FastStream:
    """A FastStream app that connects, runs ``build(js)``, then starts the lifecycle's workers.

    ``js`` and the workers call the JetStream API on the prefix the broker's user calls
    (:func:`~effectgate.shared.runtime.broker.jetstream_of`).

    FastStream's own start and stop lines are replaced by one ``started`` and one ``stopped`` line.
    With a :class:`ServiceBroker`, a connection lost for good stops the app, which then
    raises :class:`~effectgate.shared.runtime.nats_watch.ConnectionLost` (exit code 1 in :func:`run_service`).
    """
    app, plan, workers = FastStream(broker, logger=None), lifecycle or Lifecycle(), list[DurableWorker]()
    started = monitor(app, broker, plan, workers, _watch_of(broker))

    @app.on_startup
    async def connect() -> None:
        await broker.connect()
        warn_if_open(broker.connection, log)
        js, js_api = jetstream_of(broker), api_prefix_of(broker)
        if plan.reporter:
            plan.reporter.attach(js)
        await build(js)
        for consumer in plan.consumers:
            worker = DurableWorker(broker.connection, consumer, fair_window=plan.fair_window, api_prefix=js_api)
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

    _exit_when_lost(app, broker, _watch_of(broker))
    return app


def _watch_of(broker: NatsBroker) -> ConnectionWatch | None:
    return broker.watch if isinstance(broker, ServiceBroker) else None


def _exit_when_lost(app: FastStream, broker: NatsBroker, watch: ConnectionWatch | None) -> None:
    """Stop ``app`` once ``watch`` says the connection is lost for good; it then raises :class:`ConnectionLost`."""
    if watch is None:
        return
    watching: list[asyncio.Task[None]] = []

    async def exit_when_lost() -> None:
        await watch.lost.wait()
        app.exit()

    @app.on_startup
    async def follow() -> None:  # after the connection is made
        watch.follow(broker.connection)
        watching.append(asyncio.create_task(exit_when_lost()))

    @app.on_shutdown
    async def stopping() -> None:
        watch.stopping()

    @app.after_shutdown
    async def lost() -> None:
        for task in watching:
            task.cancel()
        if watch.lost.is_set():
            raise ConnectionLost(watch.reason)


def run_service(service: str, create_app: Callable[[], FastStream]) -> int:
    """Run one service process: configure logging first, then build the app and run it until stopped.

    An error that ends the service (at start or later) is logged as one CRITICAL record
    naming it, with its traceback, in the configured format (never the interpreter's raw
    traceback). A log setting it does not know ends it at once with one line on stderr.

    Returns:
        The exit code: 0 when stopped, 1 when an error ended it (a NATS connection lost for
        good included), 2 for an unknown log setting.
    """
    try:
        configure_logging(service)  # first: what the service logs while it is built is formatted too
    except EffectgateError as error:
        print(f"{service} cannot start: {error.reason}", file=sys.stderr)
        return 2
    try:
        asyncio.run(create_app().run())
    except ConnectionLost as error:  # one line: the reason is the whole story, a traceback adds nothing
        log.critical("%s", error)
        return 1
    except Exception as error:
        log.critical("%s stopped by an error: %s", service, error, exc_info=True)
        return 1
    return 0
