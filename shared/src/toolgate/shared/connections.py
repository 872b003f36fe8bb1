"""Connections every service opens the same way."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nats
from nats.aio.client import Client

from toolgate.contracts.errors import NatsUnreachable
from toolgate.contracts.nats_credentials import redact
from toolgate.shared.settings import ServiceSettings

if TYPE_CHECKING:  # redis-py (~20 MiB resident with the OpenTelemetry SDK it loads) only where Redis is used
    import redis.asyncio as aioredis

__all__ = ["CA_FILE_ENV", "NatsUnreachable", "connect_once", "redact", "redis_client", "tls_options", "warn_if_open"]

CA_FILE_ENV = "TOOLGATE_NATS_CA_FILE"
"""The environment variable naming the CA (PEM) that NATS clients verify the server with."""


async def _quiet(error: Exception) -> None:
    """nats-py reports each failed attempt here as well; the caller reports the outcome once."""


async def connect_once(url: str, timeout_s: float = 3.0, **options: Any) -> Client:
    """Connect to NATS with one attempt, for commands: fail in seconds, not after minutes of retries.

    nats-py's defaults retry the first connection 60 times, 2 s apart, printing each error.

    Raises:
        NatsUnreachable: no connection within ``timeout_s`` seconds.
    """
    settings: dict[str, Any] = {"allow_reconnect": False, "max_reconnect_attempts": 1, "reconnect_time_wait": 0.2}
    settings["error_cb"] = _quiet
    try:
        return await nats.connect(url, connect_timeout=timeout_s, **{**settings, **options})
    except (OSError, nats.errors.Error) as error:
        reason = str(error) or type(error).__name__
        raise NatsUnreachable(redact(f"cannot reach NATS at {url}: {reason}")) from None


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

    redis-py's defaults (5 s timeouts, 10 retries) would stall each call for seconds.
    One immediate retry, on a broken connection only (never on a timeout): after a Redis
    restart the first command on a pooled socket fails with "Connection closed by server"
    although the server is up; the retry reconnects. Every toolgate script is exact under
    that retry (claims carry a nonce, completions and resolutions are idempotent).

    redis-py is imported here: the registry and the audit, which never use Redis, do not load it.
    """
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    timeout_s = settings.redis_timeout_s
    return aioredis.Redis.from_url(
        settings.redis_url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        health_check_interval=0,
    )
