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
from redis.asyncio import Redis

from toolgate.contracts.catalog import Subjects
from toolgate.contracts.directory import DirectoryInvalid, PrincipalDirectory
from toolgate.contracts.events import PolicyPublished
from toolgate.contracts.signing import sign_event
from toolgate.policy.adapters.redis_budgets import RedisBudgetLedger
from toolgate.policy.adapters.redis_gate import RedisReplayGate
from toolgate.policy.adapters.redis_limiter import RedisRateLimiter
from toolgate.policy.adapters.redis_replays import RedisReplayIndex
from toolgate.policy.adapters.stream import StreamSpendTrail
from toolgate.policy.admission import Spending
from toolgate.policy.attributes import load_attributes
from toolgate.policy.available import AvailableDescriptors
from toolgate.policy.budget_rebuild import BudgetRebuilder
from toolgate.policy.budgets import BudgetBook, load_budgets
from toolgate.policy.domain import PolicyPorts
from toolgate.policy.engine import build_engine
from toolgate.policy.errors import PolicyInvalid
from toolgate.policy.following import Follower, follow_policy
from toolgate.policy.handlers import (
    BudgetRuntime,
    PolicyRuntime,
    budget_consumers,
    build_router,
    consumers,
    route_budgets,
)
from toolgate.policy.holder import PolicyHolder
from toolgate.policy.publishing import Publisher
from toolgate.policy.refresh import follow_registry, refresh_once
from toolgate.policy.settings import PolicySettings
from toolgate.shared.bus import publish_event
from toolgate.shared.connections import redis_client
from toolgate.shared.health import monitoring
from toolgate.shared.keyring import load_own_private_key, public_key_of
from toolgate.shared.policy_kv import PolicyBucket
from toolgate.shared.redis_ready import RedisReachable
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.service import Lifecycle, RuntimeCell, new_app, new_broker
from toolgate.shared.tools_kv import ToolsBucket

__all__ = ["create_app"]

log = logging.getLogger("toolgate.policy")


def _holder(settings: PolicySettings) -> tuple[PolicyHolder, BudgetBook]:
    """A holder that builds policies over the directory and attributes read once (none yet in force), and the budgets.

    An unreadable or invalid budgets file is an invalid policy: no engine, every request denied.
    """
    try:
        directory = PrincipalDirectory.from_toml(settings.principals_file.read_text(encoding="utf-8"))
        attributes = load_attributes(settings.attributes_file)
        book = load_budgets(settings.budgets_file)
        book.check_principals(directory.principals, str(settings.budgets_file))
    except (OSError, UnicodeDecodeError, DirectoryInvalid, PolicyInvalid) as error:
        holder = PolicyHolder(broken=getattr(error, "reason", None) or str(error))
        log.error("NOT READY: policy not loaded, every request will be denied: %s", holder.problem)
        return holder, BudgetBook()
    return PolicyHolder(build=lambda t, listed: build_engine(t, directory, attributes, listed)), book


def _file_text(settings: PolicySettings) -> str | None:
    try:
        return settings.policy_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        log.error("policy file %s not read; the published policy stays in force: %s", settings.policy_file, error)
        return None


def create_app(settings: PolicySettings | None = None) -> FastStream:
    """Build the policy service.

    Raises:
        OSError / ValueError: the signing key ``<keys_dir>/policy.key``, or the public keys
            ``approvals.pub`` / ``receipts.pub`` (grants and receipts settle budgets), are
            missing or invalid.
        toolgate.shared.keyring.KeyLayoutError: ``keys_dir`` holds another service's private key.
    """
    settings = settings or PolicySettings()
    key = load_own_private_key(settings.keys_dir, "policy")
    approvals_key, receipts_key = (
        public_key_of(settings.keys_dir, "approvals"),
        public_key_of(settings.keys_dir, "receipts"),
    )
    reporter = SecurityReporter("policy")  # permission violations on its connection, forged receipts
    broker = new_broker("policy", settings, reporter)
    cell: RuntimeCell[PolicyRuntime] = RuntimeCell()
    budget_cell: RuntimeCell[BudgetRuntime] = RuntimeCell()
    clock = lambda: datetime.now(UTC)  # noqa: E731
    router = build_router(cell, clock)
    route_budgets(router, budget_cell)
    broker.include_router(router)

    following: list[asyncio.Task[None]] = []
    rebuilders: list[BudgetRebuilder] = []

    async def announce(event: PolicyPublished) -> None:
        await publish_event(broker.connection.jetstream(), Subjects.POLICY_PUBLISHED, sign_event(event, key))

    async def build(js: JetStreamContext) -> None:
        (holder, book), descriptors, store = _holder(settings), await ToolsBucket.open(js), await PolicyBucket.open(js)
        await descriptors.follow_latest(broker.connection)  # no bucket read per call for the latest version
        publisher = Publisher(holder, store, descriptors, clock, announce)
        follower, wake = Follower(holder, store, descriptors, reporter), asyncio.Event()
        await broker.connection.subscribe(Subjects.POLICY_CURRENT, cb=_waker(wake))  # before reading: none missed
        following.extend(await _put_in_force(settings, holder, publisher, follower, descriptors))
        log.info("%d spend budgets from %s", len(book.budgets), settings.budgets_file)
        following.append(asyncio.create_task(follow_policy(follower, wake, settings.follow_interval_s)))
        redis = redis_client(settings)
        ledger = RedisBudgetLedger(redis, ended_ttl_s=settings.admitted_ttl_s, on_lost=lambda: rebuilders[0].start())
        spending = Spending(book, ledger, settings.budget_keep_s)
        trail = StreamSpendTrail(js, key.public_key(), approvals_key, receipts_key)
        rebuilders.append(BudgetRebuilder(spending, ledger, trail, descriptors, clock))
        rebuilders[0].start()  # a new or emptied ledger is rebuilt from the stream before it is used
        ports = _ports(settings, redis, holder, descriptors, clock, spending)
        cell.set(PolicyRuntime(ports, key, js, publisher, _REPLICA, settings.max_policy_bytes, reporter))
        budget_cell.set(BudgetRuntime(spending=spending, receipts_key=receipts_key, reporter=reporter))

    async def stop_background() -> None:
        for task in following:
            task.cancel()
        for rebuilder in rebuilders:
            await rebuilder.stop()

    def policy_loaded() -> str | None:
        readiness = cell().ports.policy.readiness()
        return None if readiness.ready else readiness.reason

    redis_ready = RedisReachable(redis_client(settings))
    plan = Lifecycle(
        consumers=[*consumers(cell), *budget_consumers(budget_cell)],
        reporter=reporter,
        closers=(stop_background, redis_ready.aclose),
        monitoring=monitoring("policy", settings),
        ready_checks={"policy": policy_loaded, "redis": redis_ready},
    )
    return new_app(broker, build, plan)


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
    settings: PolicySettings,
    redis: Redis,
    holder: PolicyHolder,
    tools: ToolsBucket,
    clock: Callable[[], datetime],
    spending: Spending,
) -> PolicyPorts:
    return PolicyPorts(
        policy=holder,
        descriptors=AvailableDescriptors(tools),  # a stored descriptor whose references dangle cannot be called
        limiter=RedisRateLimiter(redis, admitted_ttl_s=settings.admitted_ttl_s),
        replays=RedisReplayIndex(redis),
        gate=RedisReplayGate(redis, admitted_ttl_s=settings.admitted_ttl_s),  # lookup + rate: one round trip
        clock=clock,
        max_request_bytes=settings.max_request_bytes,
        spending=spending,
        states=tools,
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
