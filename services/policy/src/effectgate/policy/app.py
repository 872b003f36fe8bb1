"""Composition root of the policy service: the only place its settings are read.

At start a replica seeds its policy file into the policy bucket when the file changed
since it was last seeded (:mod:`effectgate.policy.in_force.publishing`), puts the policy in force
there in its holder, and then follows it (:mod:`effectgate.policy.in_force.following`) and the
registry (:mod:`effectgate.policy.in_force.refresh`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial

from faststream import FastStream
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from redis.asyncio import Redis

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.directory import DirectoryInvalid, PrincipalDirectory
from effectgate.contracts.events import PolicyPublished
from effectgate.contracts.integrity.signing import sign_event
from effectgate.policy.adapters.asking import ask_for_approval
from effectgate.policy.adapters.redis_budgets import RedisBudgetLedger
from effectgate.policy.adapters.redis_gate import RedisReplayGate
from effectgate.policy.adapters.redis_limiter import RedisRateLimiter
from effectgate.policy.adapters.redis_replays import RedisReplayIndex
from effectgate.policy.adapters.stream import StreamSpendTrail
from effectgate.policy.budgets.rebuild import BudgetRebuilder
from effectgate.policy.budgets.rules import BudgetBook, load_budgets
from effectgate.policy.cedar.attributes import load_attributes
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.errors import PolicyInvalid
from effectgate.policy.handlers.decisions import PolicyRuntime, consumers
from effectgate.policy.handlers.operator import route_budgets
from effectgate.policy.handlers.routes import build_router
from effectgate.policy.handlers.settlement import BudgetRuntime, budget_consumers
from effectgate.policy.in_force.available import AvailableDescriptors
from effectgate.policy.in_force.following import Follower, follow_policy
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.in_force.publishing import Publisher
from effectgate.policy.in_force.refresh import follow_registry, refresh_once
from effectgate.policy.pipeline.admission import Spending
from effectgate.policy.service import PolicyPorts
from effectgate.policy.settings import PolicySettings
from effectgate.shared.config.bus import BusSettings
from effectgate.shared.config.keyring import load_own_private_key, public_key_of
from effectgate.shared.runtime.assembly import Lifecycle, RuntimeCell, new_app, new_broker
from effectgate.shared.runtime.connections import redis_client
from effectgate.shared.runtime.health import monitoring
from effectgate.shared.runtime.redis_ready import RedisReachable
from effectgate.shared.runtime.reporting import SecurityReporter
from effectgate.shared.stores.policy_kv import PolicyBucket
from effectgate.shared.stores.record_usage import RecordUsage
from effectgate.shared.stores.stream import publish_event
from effectgate.shared.stores.tools_kv import ToolsBucket

__all__ = ["create_app"]

log = logging.getLogger("effectgate.policy")


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
        effectgate.shared.config.keyring.KeyLayoutError: ``keys_dir`` holds another service's private key.
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
    room: RuntimeCell[RecordUsage] = RuntimeCell()
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
        room.set(RecordUsage(js, BusSettings(config_file=settings.config_file).store_high_water, reporter))
        ports = _ports(settings, redis, holder, descriptors, clock, spending, room())
        ask = partial(ask_for_approval, js, key=key.public_key())
        cell.set(PolicyRuntime(ports, key, js, publisher, _REPLICA, settings.max_policy_bytes, ask, reporter))
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
        ready_checks={"policy": policy_loaded, "redis": redis_ready, "record_store": lambda: room().ready()},
        probes=[lambda: room().probe()],
        fair_window=settings.fair_window,
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
    room: RecordUsage | None = None,
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
        room=room,
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
