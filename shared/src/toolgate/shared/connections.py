"""Connections every service opens the same way."""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.retry import Retry

from toolgate.shared.settings import ServiceSettings

__all__ = ["redis_client"]


def redis_client(settings: ServiceSettings) -> aioredis.Redis:
    """A Redis client with short timeouts and no retries: an outage fails fast (and closed).

    redis-py's defaults (5 s timeouts, 10 retries) would stall each call for seconds.
    """
    timeout_s = settings.redis_timeout_s
    return aioredis.Redis.from_url(
        settings.redis_url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
    )
