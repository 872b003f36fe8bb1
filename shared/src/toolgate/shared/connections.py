"""Connections every service opens the same way."""

from __future__ import annotations

import re
from typing import Any

import nats
import redis.asyncio as aioredis
from nats.aio.client import Client
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from toolgate.shared.settings import ServiceSettings

__all__ = ["NatsUnreachable", "connect_once", "redact", "redis_client"]


class NatsUnreachable(Exception):
    """The NATS server could not be reached (the message hides URL credentials)."""


def redact(text: str) -> str:
    """Hide the credentials of ``scheme://user:password@host`` URLs in ``text``."""
    return re.sub(r"(\w+://)[^/@\s]+@", r"\1***@", text)


async def _quiet(error: Exception) -> None:
    """nats-py reports each failed attempt here as well; the caller reports the outcome once."""


async def connect_once(url: str, timeout_s: float = 3.0, **options: Any) -> Client:
    """Connect to NATS with one attempt, for commands: fail in seconds, not after minutes of retries.

    nats-py's defaults retry the first connection 60 times, 2 s apart, printing each error.

    Raises:
        NatsUnreachable: no connection within ``timeout_s`` seconds.
    """
    settings: dict[str, Any] = {"allow_reconnect": False, "max_reconnect_attempts": 1, "reconnect_time_wait": 0.2}
    try:
        return await nats.connect(url, connect_timeout=timeout_s, error_cb=_quiet, **{**settings, **options})
    except (OSError, nats.errors.Error) as error:
        reason = str(error) or type(error).__name__
        raise NatsUnreachable(redact(f"cannot reach NATS at {url}: {reason}")) from None


def redis_client(settings: ServiceSettings) -> aioredis.Redis:
    """A Redis client with short timeouts: an outage fails fast (and closed).

    redis-py's defaults (5 s timeouts, 10 retries) would stall each call for seconds.
    One immediate retry, on a broken connection only (never on a timeout): after a Redis
    restart the first command on a pooled socket fails with "Connection closed by server"
    although the server is up; the retry reconnects. Every toolgate script is exact under
    that retry (claims carry a nonce, completions and resolutions are idempotent).
    """
    timeout_s = settings.redis_timeout_s
    return aioredis.Redis.from_url(
        settings.redis_url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        health_check_interval=0,
    )
