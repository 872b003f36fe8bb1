"""Composition root of the policy service: the only place its settings are read."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from faststream import FastStream
from nats.js import JetStreamContext

from toolgate.policy.adapters.redis_budgets import RedisBudgetLedger
from toolgate.policy.adapters.redis_limiter import RedisRateLimiter
from toolgate.policy.adapters.redis_replays import RedisReplayIndex
from toolgate.policy.adapters.stream import StreamSpendTrail
from toolgate.policy.admission import Spending
from toolgate.policy.attributes import load_attributes
from toolgate.policy.budget_rebuild import BudgetRebuilder
from toolgate.policy.budgets import BudgetBook, load_budgets
from toolgate.policy.domain import PolicyPorts
from toolgate.policy.engine import build_engine
from toolgate.policy.errors import PolicyInvalid
from toolgate.policy.handlers import (
    BudgetRuntime,
    PolicyRuntime,
    budget_consumers,
    build_router,
    consumers,
    route_budgets,
)
from toolgate.policy.holder import PolicyHolder
from toolgate.policy.refresh import follow_registry, refresh_once
from toolgate.policy.settings import PolicySettings
from toolgate.shared.connections import redis_client
from toolgate.shared.directory import DirectoryInvalid, PrincipalDirectory
from toolgate.shared.keyring import load_own_private_key, public_key_of
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.service import Lifecycle, RuntimeCell, new_app, new_broker
from toolgate.shared.tools_kv import ToolsBucket

__all__ = ["create_app"]

log = logging.getLogger("toolgate.policy")


def _holder(settings: PolicySettings) -> tuple[PolicyHolder, BudgetBook]:
    """A holder that builds the policy file's text over the directory and attributes read once, and the budgets.

    An unreadable or invalid budgets file is an invalid policy: no engine, every request denied.
    """
    try:
        text = settings.policy_file.read_text(encoding="utf-8")
        directory = PrincipalDirectory.from_toml(settings.principals_file.read_text(encoding="utf-8"))
        attributes = load_attributes(settings.attributes_file)
        book = load_budgets(settings.budgets_file)
    except (OSError, UnicodeDecodeError, DirectoryInvalid, PolicyInvalid) as error:
        holder = PolicyHolder()
        holder.problem = getattr(error, "reason", None) or str(error)
        log.error("NOT READY: policy not loaded, every request will be denied: %s", holder.problem)
        return holder, BudgetBook()
    holder = PolicyHolder(build=lambda t, listed: build_engine(t, directory, attributes, listed), text=text)
    return holder, book


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

    async def build(js: JetStreamContext) -> None:
        redis = redis_client(settings)
        (holder, book), descriptors = _holder(settings), await ToolsBucket.open(js)
        await refresh_once(holder, descriptors, None)
        _log_state(holder, settings, book)
        following.append(asyncio.create_task(follow_registry(holder, descriptors, settings.registry_refresh_s)))
        ledger = RedisBudgetLedger(redis, ended_ttl_s=settings.admitted_ttl_s, on_lost=lambda: rebuilders[0].start())
        spending = Spending(book, ledger, settings.budget_keep_s)
        trail = StreamSpendTrail(js, key.public_key(), approvals_key, receipts_key)
        rebuilders.append(BudgetRebuilder(spending, ledger, trail, descriptors, clock))
        rebuilders[0].start()  # a new or emptied ledger is rebuilt from the stream before it is used
        ports = PolicyPorts(
            policy=holder,
            descriptors=descriptors,
            limiter=RedisRateLimiter(redis, admitted_ttl_s=settings.admitted_ttl_s),
            replays=RedisReplayIndex(redis),
            clock=clock,
            max_request_bytes=settings.max_request_bytes,
            spending=spending,
        )
        cell.set(PolicyRuntime(ports=ports, key=key, js=js))
        budget_cell.set(BudgetRuntime(spending=spending, receipts_key=receipts_key, reporter=reporter))

    async def stop_background() -> None:
        for task in following:
            task.cancel()
        for rebuilder in rebuilders:
            await rebuilder.stop()

    plan = Lifecycle(
        consumers=[*consumers(cell), *budget_consumers(budget_cell)], reporter=reporter, closers=(stop_background,)
    )
    return new_app(broker, build, plan)


def _log_state(holder: PolicyHolder, settings: PolicySettings, book: BudgetBook) -> None:
    readiness, engine = holder.readiness(), holder.engine
    if not readiness.ready:
        log.error("NOT READY: %s (%s)", readiness.reason, settings.policy_file)
        return
    for note in engine.notes if engine else ():
        log.info("policy context: %s", note)
    log.info("policy loaded from %s: %s", settings.policy_file, readiness.reason)
    log.info("%d spend budgets from %s", len(book.budgets), settings.budgets_file)
