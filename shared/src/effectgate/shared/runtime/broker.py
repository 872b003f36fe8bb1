"""A service's NATS broker: FastStream's, on a list of servers, as one identity, watched.

It connects to any server of ``NATS_URL`` with the service's credentials as connect options
(:mod:`effectgate.shared.runtime.nats_options`), so a reconnect to another server carries the
same identity; its :class:`~effectgate.shared.runtime.nats_watch.ConnectionWatch` follows the
connection (readiness, and the loss that ends the service).
"""

from __future__ import annotations

import logging
from types import TracebackType

import nats.errors
from faststream.nats import NatsBroker
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from nats.aio.client import Client
from nats.js import JetStreamContext

from effectgate.contracts.bus.nats_accounts import js_api_of
from effectgate.contracts.bus.nats_credentials import KEEPALIVE
from effectgate.contracts.bus.nats_permissions import JS_API
from effectgate.shared.config.settings import ServiceSettings
from effectgate.shared.runtime import tracing
from effectgate.shared.runtime.nats_options import broker_security, servers_and_auth
from effectgate.shared.runtime.nats_watch import ConnectionWatch
from effectgate.shared.runtime.reporting import SecurityReporter
from effectgate.shared.runtime.telemetry import tracer_provider

__all__ = ["ServiceBroker", "api_prefix_of", "jetstream_of", "new_broker"]


class ServiceBroker(NatsBroker):
    """A service's broker, with the :class:`ConnectionWatch` of its connection (see :func:`new_broker`).

    Attributes:
        watch: follows the connection.
        js_api: the JetStream API prefix its user calls
            (:func:`~effectgate.contracts.bus.nats_accounts.js_api_of`: ``$JS.API``, or its account's import name).
    """

    watch: ConnectionWatch
    js_api: str = JS_API

    async def stop(
        self,
        exc_type: type[BaseException] | None = None,
        exc_val: BaseException | None = None,
        exc_tb: TracebackType | None = None,
    ) -> None:
        """Stop; a connection that is not connected (reconnecting, closed) is closed, not drained.

        nats-py refuses to drain such a connection (``ConnectionReconnectingError``): a
        service stopped while its server is away would otherwise end with an error.
        """
        connection = self._connection  # FastStream keeps the client here; None once stopped
        if connection is None or connection.is_connected:
            await super().stop(exc_type, exc_val, exc_tb)
            return
        await connection.close()
        _read_outcome(connection)
        try:
            await super().stop(exc_type, exc_val, exc_tb)
        except* nats.errors.ConnectionClosedError:  # its subscriptions and its drain went with it
            self._connection = None


def api_prefix_of(broker: NatsBroker) -> str:
    """The JetStream API prefix ``broker``'s user calls: :attr:`ServiceBroker.js_api`, else ``$JS.API``."""
    return broker.js_api if isinstance(broker, ServiceBroker) else JS_API


def jetstream_of(broker: NatsBroker) -> JetStreamContext:
    """The JetStream context of ``broker``'s connection, on the API prefix its user calls (:func:`api_prefix_of`)."""
    return broker.connection.jetstream(prefix=api_prefix_of(broker))


def _read_outcome(connection: Client) -> None:
    """Read how nats-py's reconnect task ended, so asyncio does not report it a second time.

    FastStream ends that task by raising an authorization refusal in it (the watch has
    reported the refusal already).
    """
    task = connection._reconnection_task
    if task is not None and task.done() and not task.cancelled():
        task.exception()


def new_broker(
    service: str, settings: ServiceSettings, reporter: SecurityReporter | None = None, inbox_prefix: str = "_INBOX"
) -> ServiceBroker:
    """A NATS broker with a bounded graceful shutdown (10 s), traced when OTLP export is configured.

    It connects to any server of ``NATS_URL`` (a comma-separated list) with the service's
    credentials as connect options (:func:`~effectgate.shared.runtime.nats_options.servers_and_auth`),
    so a reconnect to another server carries the same identity; its :class:`ConnectionWatch`
    follows the connection (readiness, and the loss that ends the service). A server that stops
    answering is left within about 15 s (:data:`~effectgate.contracts.bus.nats_credentials.KEEPALIVE`).

    Without an endpoint no span is created at all: spans nobody exports cost every
    message its CPU time and nothing else. With a ``reporter``, every NATS permissions
    violation on the connection is reported as a security event. ``inbox_prefix``: the
    reply prefix (a private ``_INBOX_<user>`` for a service that must not read others' replies).
    Its JetStream API prefix (:attr:`ServiceBroker.js_api`) follows from the user it connects as:
    the chat-ops bot's account imports the API under another name; without a user (an open
    server, no accounts) it is ``$JS.API``.

    The broker logs through ``effectgate.bus`` (its per-message lines are DEBUG); the process's
    logging is configured by the service's ``__main__`` (:func:`~effectgate.shared.runtime.logs.configure_logging`).

    Raises:
        effectgate.shared.runtime.nats_options.NatsSettingsInvalid: unusable NATS settings.
    """
    middlewares = []
    if settings.otlp_endpoint:
        provider = tracer_provider(service, settings.otlp_endpoint)
        tracing.enable(provider)
        middlewares.append(NatsTelemetryMiddleware(tracer_provider=provider))
    servers, auth = servers_and_auth(settings)
    watch = ConnectionWatch(service, settings.nats_refused_exit_s)

    async def on_error(error: Exception) -> None:
        await watch.on_error(error)
        if reporter:
            await reporter.on_error(error)

    broker = ServiceBroker(
        servers,
        security=broker_security(auth, settings.nats_ca_file),
        graceful_timeout=10.0,
        middlewares=middlewares,
        max_reconnect_attempts=-1,
        ping_interval=KEEPALIVE["ping_interval"],
        max_outstanding_pings=KEEPALIVE["max_outstanding_pings"],
        error_cb=on_error,
        disconnected_cb=watch.on_disconnected,
        reconnected_cb=watch.on_reconnected,
        closed_cb=watch.on_closed,
        inbox_prefix=inbox_prefix,
        logger=logging.getLogger("effectgate.bus"),
        log_level=logging.DEBUG,  # per-message "Received/Processed" lines; one request line per message at INFO
    )
    broker.watch, broker.js_api = watch, js_api_of(auth.user)
    return broker
