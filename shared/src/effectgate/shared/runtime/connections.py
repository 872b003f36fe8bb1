"""Connections every service opens the same way."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nats
from nats.aio.client import Client

from effectgate.contracts.bus.nats_credentials import connect_arguments, redact, rotated
from effectgate.contracts.errors import NatsUnreachable
from effectgate.shared.config.settings import ServiceSettings

if TYPE_CHECKING:  # redis-py (~20 MiB resident with the OpenTelemetry SDK it loads) only where Redis is used
    import redis.asyncio as aioredis

__all__ = ["CA_FILE_ENV", "NatsUnreachable", "connect_once", "redact", "redis_client", "tls_options", "warn_if_open"]

CA_FILE_ENV = "EFFECTGATE_NATS_CA_FILE"
"""The environment variable naming the CA (PEM) that NATS clients verify the server with."""


async def _quiet(error: Exception) -> None:
    """nats-py reports each failed attempt here as well; the caller reports the outcome once."""


async def connect_once(url: str, timeout_s: float = 3.0, **options: Any) -> Client:
    """Connect to NATS with one attempt per server, for commands: fail in seconds, not after minutes of retries.

    ``url`` is one URL or a comma-separated list, tried in order (the first that answers
    serves; when none does, again from each next server, as a frozen one is never passed over);
    credentials written in a URL are sent as options to every server
    (:func:`~effectgate.contracts.bus.nats_credentials.lift_credentials`) unless ``options``
    carry their own. nats-py's defaults retry the first connection 60 times, 2 s apart,
    printing each error.

    Raises:
        NatsUrlInvalid: the list is malformed.
        NatsUnreachable: no server answered within ``timeout_s`` seconds each.
    """
    servers, options = connect_arguments(url, options)
    settings: dict[str, Any] = {"allow_reconnect": False, "max_reconnect_attempts": 1, "reconnect_time_wait": 0.2}
    settings |= {"dont_randomize": True, "error_cb": _quiet}  # a server that refuses: the next is tried
    reason = ""
    for start in range(len(servers)):  # one that accepts and never answers (frozen) is tried first once only
        try:
            return await nats.connect(rotated(servers, start), connect_timeout=timeout_s, **{**settings, **options})
        except (OSError, nats.errors.Error) as error:
            reason = str(error) or type(error).__name__
    raise NatsUnreachable(redact(f"cannot reach NATS at {url}: {reason}"))


def tls_options(ca_file: str | Path | None) -> dict[str, Any]:
    """``nats.connect`` options for a TLS connection whose server certificate ``ca_file`` signed.

    With a CA file the client opens TLS before it sends anything (``tls_handshake_first``,
    nats-server 2.10.4+: the server's ``tls {}`` block needs ``handshake_first: true``), so
    a server, or a man in the middle, that does not offer TLS never sees the password.
    The certificate must name the URL's host (Python ``ssl`` hostname check, RFC 6125).
    Without a CA file: no options (a plain connection).

    Raises:
        OSError / ssl.SSLError: ``ca_file`` cannot be read or holds no certificate.
    """
    if not ca_file:
        return {}
    return {"tls": ssl.create_default_context(cafile=str(ca_file)), "tls_handshake_first": True}


def warn_if_open(nc: Client, log: logging.Logger) -> None:
    """Log a warning when the connected NATS server asks for no credentials (anyone may do anything).

    Read from the server's INFO (``auth_required``, NATS client protocol), which nats-py
    keeps but does not expose.
    """
    if not getattr(nc, "_server_info", {}).get("auth_required"):
        server = nc.connected_url.netloc.rpartition("@")[2] if nc.connected_url else "?"
        log.warning("INSECURE: NATS at %s requires no credentials: any client may publish and read anything", server)


def redis_client(settings: ServiceSettings) -> aioredis.Redis:
    """A Redis client with short timeouts: an outage fails fast (and closed).

    One server or a primary found through Sentinel, as ``settings.redis_url`` says; see
    :func:`effectgate.shared.runtime.redis_clients.client_for_url` (timeouts, the one retry).
    redis-py is imported there: the registry and the audit, which never use Redis, do not load it.
    """
    from effectgate.shared.runtime.redis_clients import client_for_url

    return client_for_url(settings.redis_url, settings.redis_timeout_s)
