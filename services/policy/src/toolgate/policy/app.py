"""Composition root of the policy service: the only place its settings are read.

At start a replica seeds its policy file into the policy bucket when the file changed
since it was last seeded (:mod:`toolgate.policy.publishing`), puts the policy in force
there in its holder, and then follows it (:mod:`toolgate.policy.following`) and the
registry (:mod:`toolgate.policy.refresh`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from faststream import FastStream
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from toolgate.policy.adapters.redis_limiter import RedisRateLimiter
from toolgate.policy.adapters.redis_replays import RedisReplayIndex
from toolgate.policy.attributes import load_attributes
from toolgate.policy.domain import PolicyPorts
from toolgate.policy.engine import build_engine
from toolgate.policy.errors import PolicyInvalid
from toolgate.policy.following import Follower, follow_policy
from toolgate.policy.handlers import PolicyRuntime, build_router, consumers
from toolgate.policy.holder import PolicyHolder
from toolgate.policy.publishing import Publisher
from toolgate.policy.refresh import follow_registry, refresh_once
from toolgate.policy.settings import PolicySettings
from toolgate.shared.bus import publish_event
from toolgate.shared.catalog import Subjects
from toolgate.shared.connections import redis_client
from toolgate.shared.directory import DirectoryInvalid, PrincipalDirectory
from toolgate.shared.events import PolicyPublished
from toolgate.shared.keyring import load_own_private_key
from toolgate.shared.policy_kv import PolicyBucket
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.service import Lifecycle, RuntimeCell, new_app, new_broker
from toolgate.shared.signing import sign_event
from toolgate.shared.tools_kv import ToolsBucket

__all__ = ["create_app"]

log = logging.getLogger("toolgate.policy")


def _holder(settings: PolicySettings) -> PolicyHolder:
    """A holder that builds policies over the directory and attributes read once (none yet in force)."""
    try:
        directory = PrincipalDirectory.from_toml(settings.principals_file.read_text(encoding="utf-8"))
        attributes = load_attributes(settings.attributes_file)
    except (OSError, UnicodeDecodeError, DirectoryInvalid, PolicyInvalid) as error:
        holder = PolicyHolder(broken=getattr(error, "reason", None) or str(error))
        log.error("NOT READY: policy not loaded, every request will be denied: %s", holder.problem)
        return holder
    return PolicyHolder(build=lambda t, listed: build_engine(t, directory, attributes, listed))


def _file_text(settings: PolicySettings) -> str | None:
    try:
        return settings.policy_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        log.error("policy file %s not read; the published policy stays in force: %s", settings.policy_file, error)
        return None


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

    async def announce(event: PolicyPublished) -> None:
        await publish_event(broker.connection.jetstream(), Subjects.POLICY_PUBLISHED, sign_event(event, key))

    async def build(js: JetStreamContext) -> None:
        holder, descriptors, store = _holder(settings), await ToolsBucket.open(js), await PolicyBucket.open(js)
        publisher = Publisher(holder, store, descriptors, clock, announce)
        follower, wake = Follower(holder, store, descriptors, reporter), asyncio.Event()
        await broker.connection.subscribe(Subjects.POLICY_CURRENT, cb=_waker(wake))  # before reading: none missed
        following.extend(await _put_in_force(settings, holder, publisher, follower, descriptors))
        following.append(asyncio.create_task(follow_policy(follower, wake, settings.follow_interval_s)))
        ports = _ports(settings, holder, descriptors, clock)
        cell.set(PolicyRuntime(ports, key, js, publisher, _REPLICA, settings.max_policy_bytes))

    async def stop_following() -> None:
        for task in following:
            task.cancel()

    lifecycle = Lifecycle(consumers=consumers(cell), reporter=reporter, closers=(stop_following,))
    return new_app(broker, build, lifecycle)


_REPLICA = f"{socket.gethostname()}:{os.getpid()}"
"""This replica, as readiness names it."""


async def _put_in_force(
    settings: PolicySettings, holder: PolicyHolder, publisher: Publisher, follower: Follower, tools: ToolsBucket
) -> list[asyncio.Task[None]]:
    """Seed the policy file, put the published policy in force here; return the tasks that keep it so."""
    file_text = _file_text(settings)
    seeded = await publisher.seed(file_text) if file_text is not None else "policy file not read"
    log.info("%s: %s", settings.policy_file, seeded)
    await follower.check()
    if holder.engine is None and holder.problem is None:
        holder.problem = seeded
    await refresh_once(holder, tools, None)
    _log_state(holder, settings)
    tasks = [asyncio.create_task(follow_registry(holder, tools, settings.registry_refresh_s))]
    if holder.engine is None and file_text is not None:  # nothing in force: try the file as the registry grows
        tasks.append(asyncio.create_task(publisher.retry_seed(file_text, settings.follow_interval_s)))
    return tasks


def _ports(
    settings: PolicySettings, holder: PolicyHolder, tools: ToolsBucket, clock: Callable[[], datetime]
) -> PolicyPorts:
    redis = redis_client(settings)
    return PolicyPorts(
        policy=holder,
        descriptors=tools,
        limiter=RedisRateLimiter(redis, admitted_ttl_s=settings.admitted_ttl_s),
        replays=RedisReplayIndex(redis),
        clock=clock,
        max_request_bytes=settings.max_request_bytes,
    )


def _waker(wake: asyncio.Event) -> Callable[[Msg], Awaitable[None]]:
    """A subscription callback that wakes the follower: a publication was stored, read ``current`` now."""

    async def on_current(msg: Msg) -> None:
        wake.set()

    return on_current


def _log_state(holder: PolicyHolder, settings: PolicySettings) -> None:
    readiness, engine = holder.readiness(), holder.engine
    if not readiness.ready:
        log.error("NOT READY: %s (%s)", readiness.reason, settings.policy_file)
        return
    for note in engine.notes if engine else ():
        log.info("policy context: %s", note)
    log.info("policy in force: %s", readiness.reason)
