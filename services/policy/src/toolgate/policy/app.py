"""Composition root of the policy service: the only place its settings are read."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from faststream import FastStream
from nats.js import JetStreamContext

from toolgate.policy.adapters.redis_limiter import RedisRateLimiter
from toolgate.policy.adapters.redis_replays import RedisReplayIndex
from toolgate.policy.attributes import load_attributes
from toolgate.policy.domain import PolicyPorts
from toolgate.policy.engine import build_engine
from toolgate.policy.errors import PolicyInvalid
from toolgate.policy.handlers import PolicyRuntime, build_router, consumers
from toolgate.policy.holder import PolicyHolder
from toolgate.policy.refresh import follow_registry, refresh_once
from toolgate.policy.settings import PolicySettings
from toolgate.shared.connections import redis_client
from toolgate.shared.directory import DirectoryInvalid, PrincipalDirectory
from toolgate.shared.keyring import load_own_private_key
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.service import Lifecycle, RuntimeCell, new_app, new_broker
from toolgate.shared.tools_kv import ToolsBucket

__all__ = ["create_app"]

log = logging.getLogger("toolgate.policy")


def _holder(settings: PolicySettings) -> PolicyHolder:
    """A holder that builds the policy file's text over the directory and attributes read once."""
    try:
        text = settings.policy_file.read_text(encoding="utf-8")
        directory = PrincipalDirectory.from_toml(settings.principals_file.read_text(encoding="utf-8"))
        attributes = load_attributes(settings.attributes_file)
    except (OSError, UnicodeDecodeError, DirectoryInvalid, PolicyInvalid) as error:
        holder = PolicyHolder()
        holder.problem = getattr(error, "reason", None) or str(error)
        log.error("NOT READY: policy not loaded, every request will be denied: %s", holder.problem)
        return holder
    return PolicyHolder(build=lambda t, listed: build_engine(t, directory, attributes, listed), text=text)


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

    following: list[asyncio.Task[None]] = []

    async def build(js: JetStreamContext) -> None:
        redis = redis_client(settings)
        holder, descriptors = _holder(settings), await ToolsBucket.open(js)
        await refresh_once(holder, descriptors, None)
        _log_state(holder, settings)
        following.append(asyncio.create_task(follow_registry(holder, descriptors, settings.registry_refresh_s)))
        ports = PolicyPorts(
            policy=holder,
            descriptors=descriptors,
            limiter=RedisRateLimiter(redis, admitted_ttl_s=settings.admitted_ttl_s),
            replays=RedisReplayIndex(redis),
            clock=clock,
            max_request_bytes=settings.max_request_bytes,
        )
        cell.set(PolicyRuntime(ports=ports, key=key, js=js))

    async def stop_following() -> None:
        for task in following:
            task.cancel()

    lifecycle = Lifecycle(consumers=consumers(cell), reporter=reporter, closers=(stop_following,))
    return new_app(broker, build, lifecycle)


def _log_state(holder: PolicyHolder, settings: PolicySettings) -> None:
    readiness, engine = holder.readiness(), holder.engine
    if not readiness.ready:
        log.error("NOT READY: %s (%s)", readiness.reason, settings.policy_file)
        return
    for note in engine.notes if engine else ():
        log.info("policy context: %s", note)
    log.info("policy loaded from %s: %s", settings.policy_file, readiness.reason)
