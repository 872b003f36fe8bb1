"""Composition root of the policy service: the only place its settings are read."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from faststream import FastStream
from nats.js import JetStreamContext

from toolgate.policy.adapters.redis_limiter import RedisRateLimiter
from toolgate.policy.adapters.redis_replays import RedisReplayIndex
from toolgate.policy.domain import PolicyPorts
from toolgate.policy.engine import PolicyEngine, load_policy
from toolgate.policy.errors import PolicyInvalid
from toolgate.policy.handlers import PolicyRuntime, build_router, consumers
from toolgate.policy.settings import PolicySettings
from toolgate.shared.connections import redis_client
from toolgate.shared.service import Lifecycle, RuntimeCell, new_app, new_broker
from toolgate.shared.signing import load_private_key
from toolgate.shared.tools_kv import ToolsBucket

__all__ = ["create_app"]

log = logging.getLogger("toolgate.policy")


def _engine(settings: PolicySettings) -> PolicyEngine | None:
    try:
        return load_policy(settings.policy_file, settings.principals_file)
    except PolicyInvalid as error:
        log.error("policy not loaded, every request will be denied: %s", error)
        return None


def create_app(settings: PolicySettings | None = None) -> FastStream:
    """Build the policy service.

    Raises:
        OSError / ValueError: the signing key ``<keys_dir>/policy.key`` is missing or invalid.
    """
    settings = settings or PolicySettings()
    key = load_private_key(settings.keys_dir / "policy.key")
    broker = new_broker("policy", settings)
    cell: RuntimeCell[PolicyRuntime] = RuntimeCell()
    clock = lambda: datetime.now(UTC)  # noqa: E731
    broker.include_router(build_router(cell, clock))

    async def build(js: JetStreamContext) -> None:
        redis = redis_client(settings)
        ports = PolicyPorts(
            engine=_engine(settings),
            descriptors=await ToolsBucket.open(js),
            limiter=RedisRateLimiter(redis, admitted_ttl_s=settings.admitted_ttl_s),
            replays=RedisReplayIndex(redis),
            clock=clock,
            max_request_bytes=settings.max_request_bytes,
        )
        cell.set(PolicyRuntime(ports=ports, key=key, js=js))

    return new_app(broker, build, Lifecycle(consumers=consumers(cell)))
