"""Composition root of the approvals service: the only place its settings are read."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from faststream import FastStream
from nats.js import JetStreamContext

from effectgate.approvals.adapters.redis_store import RedisApprovalStore
from effectgate.approvals.adapters.stream import StreamApprovalsBus
from effectgate.approvals.early import EarlyAnswers
from effectgate.approvals.handlers import ApprovalsRuntime, build_router, consumers
from effectgate.approvals.rebuild import Rebuilder
from effectgate.approvals.service import Approvals
from effectgate.approvals.settings import ApprovalsSettings
from effectgate.contracts.bus.catalog import Leases
from effectgate.contracts.directory import load_directory
from effectgate.contracts.errors import IndexLost
from effectgate.shared.config.keyring import load_own_private_key, public_key_of
from effectgate.shared.runtime import leadership
from effectgate.shared.runtime.assembly import Lifecycle, RuntimeCell, new_app, new_broker
from effectgate.shared.runtime.connections import redis_client
from effectgate.shared.runtime.health import monitoring
from effectgate.shared.runtime.leadership import Leadership
from effectgate.shared.runtime.metrics import record_pending_approvals
from effectgate.shared.runtime.redis_ready import RedisReachable
from effectgate.shared.runtime.reporting import SecurityReporter
from effectgate.shared.stores.stream import publish_event

__all__ = ["create_app"]

log = logging.getLogger("effectgate.approvals")


async def _sweep(runtime: ApprovalsRuntime, interval_s: float, lease: Leadership) -> None:
    """Expire due approvals every ``interval_s`` seconds; a failure is logged once until a sweep succeeds.

    Only the replica holding the ``approvals-expiry`` lease sweeps: one sweep per deployment.
    """
    failing = False
    while True:
        await asyncio.sleep(interval_s)
        if not lease.held():
            continue
        try:
            if not await runtime.approvals.store.has_epoch():
                runtime.rebuilder.start()
            await runtime.approvals.expire_due()
        except IndexLost:
            runtime.rebuilder.start()
        except Exception as error:  # logged; the sweep itself never stops
            if not failing:
                why = type(error).__name__
                log.warning("expiry sweep failed (%s); trying every %ss", why, interval_s, exc_info=True)
            failing = True
        else:
            if failing:
                log.info("expiry sweep works again")
            failing = False


def _pending_probe(cell: RuntimeCell[ApprovalsRuntime], ttl: timedelta) -> Callable[[], Awaitable[None]]:
    """The probe of the approvals gauges: how many approvals are pending, since when (opened = expiry − ttl)."""

    async def read_pending_approvals() -> None:
        pending = await cell().approvals.store.list_pending()
        record_pending_approvals([p.expires_at - ttl for p in pending], datetime.now(UTC))

    return read_pending_approvals


def create_app(settings: ApprovalsSettings | None = None) -> FastStream:
    """Build the approvals service.

    Raises:
        OSError / ValueError: a key or the principal directory is missing or invalid.
        effectgate.shared.config.keyring.KeyLayoutError: ``keys_dir`` holds another service's private key.
    """
    settings = settings or ApprovalsSettings()
    key = load_own_private_key(settings.keys_dir, "approvals")
    policy_key = public_key_of(settings.keys_dir, "policy")
    executor_key = public_key_of(settings.keys_dir, "receipts")
    directory = load_directory(settings.principals_file)
    reporter = SecurityReporter("approvals")
    broker = new_broker("approvals", settings, reporter)
    cell: RuntimeCell[ApprovalsRuntime] = RuntimeCell()
    broker.include_router(build_router(cell))
    tasks: list[asyncio.Task[None]] = []

    async def build(js: JetStreamContext) -> None:
        async def publish(subject: str, event: Any) -> object:
            # every approval event carries an unguessable event id, so a message squatting on
            # its subject cannot block it (a redelivered decision may announce its approval twice)
            return await publish_event(js, subject, event)

        store, bus = RedisApprovalStore(redis_client(settings)), StreamApprovalsBus(broker.connection, js)
        approvals = Approvals(
            store=store,
            bus=bus,
            directory=directory,
            key=key,
            policy_key=policy_key,
            publish=publish,
            clock=lambda: datetime.now(UTC),
            ttl=timedelta(seconds=settings.ttl_s),
            executor_key=executor_key,
            reporter=reporter,
            early=EarlyAnswers(bus, directory, policy_key),
        )
        runtime = ApprovalsRuntime(approvals, Rebuilder(store, bus, key.public_key()))
        cell.set(runtime)
        runtime.rebuilder.start()
        lease = await leadership.bind(js, Leases.APPROVALS_EXPIRY, "approvals")
        tasks.append(asyncio.create_task(lease.run(), name="approvals-expiry-lease"))
        tasks.append(asyncio.create_task(_sweep(runtime, settings.sweep_interval_s, lease)))

    async def stop_tasks() -> None:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await cell().rebuilder.stop()

    probe = _pending_probe(cell, timedelta(seconds=settings.ttl_s))
    watch = monitoring("approvals", settings)
    redis_ready = RedisReachable(redis_client(settings))
    plan = Lifecycle(
        consumers(cell),
        closers=[stop_tasks, redis_ready.aclose],
        reporter=reporter,
        monitoring=watch,
        probes=[probe],
        ready_checks={"redis": redis_ready},
    )
    return new_app(broker, build, plan)
