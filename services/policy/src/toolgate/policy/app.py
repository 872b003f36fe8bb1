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
from toolgate.shared.keyring import load_own_private_key
from toolgate.shared.listing import Readiness
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.service import Lifecycle, RuntimeCell, new_app, new_broker
from toolgate.shared.tools_kv import ToolsBucket

__all__ = ["create_app"]

log = logging.getLogger("toolgate.policy")


def _engine(settings: PolicySettings) -> tuple[PolicyEngine | None, Readiness]:
    """The engine (``None`` when the policy cannot be used) and whether the service is ready."""
    try:
        engine = load_policy(settings.policy_file, settings.principals_file)
    except PolicyInvalid as error:
        log.error("NOT READY: policy not loaded, every request will be denied: %s", error)
        return None, Readiness(ready=False, reason=f"no valid policy is loaded: {error.reason}")
    if not engine.policy_ids:
        reason = f"{settings.policy_file} holds no policy: every request will be denied"
        log.error("NOT READY: %s", reason)
        return engine, Readiness(ready=False, reason=reason)
    log.info("policy loaded: %d policies from %s", len(engine.policy_ids), settings.policy_file)
    return engine, Readiness(ready=True, reason=f"{len(engine.policy_ids)} policies loaded")


def create_app(settings: PolicySettings | None = None) -> FastStream:
    """Build the policy service.

    Raises:
        OSError / ValueError: the signing key ``<keys_dir>/policy.key`` is missing or invalid.
        toolgate.shared.keyring.KeyLayoutError: ``keys_dir`` holds another service's private key.
    """
    settings = settings or PolicySettings()
    key = load_own_private_key(settings.keys_dir, "policy")
    reporter = SecurityReporter("policy")  # permission violations on its connection
    broker = new_broker("policy", settings, reporter)
    cell: RuntimeCell[PolicyRuntime] = RuntimeCell()
    clock = lambda: datetime.now(UTC)  # noqa: E731
    broker.include_router(build_router(cell, clock))

    async def build(js: JetStreamContext) -> None:
        redis = redis_client(settings)
        engine, readiness = _engine(settings)
        ports = PolicyPorts(
            engine=engine,
            descriptors=await ToolsBucket.open(js),
            limiter=RedisRateLimiter(redis, admitted_ttl_s=settings.admitted_ttl_s),
            replays=RedisReplayIndex(redis),
            clock=clock,
            max_request_bytes=settings.max_request_bytes,
        )
        cell.set(PolicyRuntime(ports=ports, key=key, js=js, readiness=readiness))

    return new_app(broker, build, Lifecycle(consumers=consumers(cell), reporter=reporter))
