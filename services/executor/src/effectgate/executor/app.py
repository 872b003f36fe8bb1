"""Composition root of the executor service: the only place its settings are read."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from faststream import FastStream
from nacl.public import PrivateKey
from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import Leases
from effectgate.contracts.integrity.sealing import load_sealing_private_key
from effectgate.executor.adapters.contents import ContentReader, content_roots
from effectgate.executor.adapters.file_system import FileSystemTool
from effectgate.executor.adapters.mcp.state_announcer import StateAnnouncer
from effectgate.executor.adapters.python.host import PythonToolHost
from effectgate.executor.adapters.python.liveness import WorkerLiveness
from effectgate.executor.adapters.python.progress import ProgressRelay
from effectgate.executor.adapters.python.serial import Serializer
from effectgate.executor.adapters.redis_idempotency import RedisIdempotencyStore
from effectgate.executor.adapters.stream import StreamBus
from effectgate.executor.adapters.tool_host import LocalToolHost
from effectgate.executor.background.backstop import Backstop, Deadlines
from effectgate.executor.background.upkeep import Lease, Upkeep
from effectgate.executor.effects.binding import ContentReporter
from effectgate.executor.effects.claims import DurableClaims
from effectgate.executor.effects.permission import Permission
from effectgate.executor.effects.running import Runner
from effectgate.executor.effects.timing import Timing
from effectgate.executor.effects.unsealing import Unsealer
from effectgate.executor.handlers import ExecutorRuntime, build_router, consumers
from effectgate.executor.receipts.outlet import ScrubbingBus
from effectgate.executor.reconciling.operator import UncertainDesk
from effectgate.executor.reconciling.reconciler import Backoff, Reconciler
from effectgate.executor.service import Executor
from effectgate.executor.settings import ExecutorSettings
from effectgate.executor.verification import Keys
from effectgate.shared.config.effectgate_file import load_servers
from effectgate.shared.config.keyring import load_own_private_key, load_public_keys, public_key_of
from effectgate.shared.config.settings import deprecated_mcp_env
from effectgate.shared.mcp.servers import McpServerConfig, configured_secrets
from effectgate.shared.mcp.stderr import scrub_with
from effectgate.shared.runtime import leadership
from effectgate.shared.runtime.assembly import Lifecycle, RuntimeCell, new_app, new_broker
from effectgate.shared.runtime.connections import redis_client
from effectgate.shared.runtime.health import ReadyCheck, monitoring
from effectgate.shared.runtime.metrics import observe_mcp_states
from effectgate.shared.runtime.redis_ready import RedisReachable
from effectgate.shared.runtime.reporting import SecurityReporter
from effectgate.shared.secrets.detectors import find_secrets
from effectgate.shared.secrets.log_scrubbing import install_log_filter
from effectgate.shared.secrets.redaction import Redactor
from effectgate.shared.stores.tools_kv import ToolsBucket

if TYPE_CHECKING:
    from effectgate.executor.adapters.mcp.client import McpToolHost

__all__ = ["create_app"]

log = logging.getLogger("effectgate.executor")

LEASE_VALID_S = 3.0
"""An executor acts on its heartbeat for 3 s; others take it for dead after 5 s without one."""


def _servers(settings: ExecutorSettings) -> dict[str, McpServerConfig]:
    if warning := deprecated_mcp_env():
        log.warning("%s", warning)
    return load_servers(settings.mcp_servers_file) if settings.mcp_servers_file else {}


def _redactor(settings: ExecutorSettings, servers: dict[str, McpServerConfig]) -> Redactor:
    """The secret rules: the detectors, the MCP servers' env and header values and the secrets file exactly."""
    known = configured_secrets(servers)
    if settings.secrets_file is not None:
        known += [line for line in settings.secrets_file.read_text(encoding="utf-8").splitlines() if line]
    return Redactor(find_secrets, known)


def _mcp(settings: ExecutorSettings, servers: dict[str, McpServerConfig], announcer: StateAnnouncer) -> McpToolHost:
    """The MCP host of ``servers``; its client stack is imported here, only when MCP servers are configured."""
    from effectgate.executor.adapters.mcp.client import McpToolHost

    return McpToolHost(
        servers,
        start_timeout_s=settings.mcp_start_timeout_s,
        breaker_faults=settings.mcp_breaker_faults,
        breaker_cool_down_s=settings.mcp_breaker_cool_down_s,
        on_change=announcer.note,
    )


def _sealing_key(path: Path) -> PrivateKey | None:
    """The executor's X25519 sealing key; without one, a call with a secret argument is refused.

    Raises:
        ValueError: the file exists but is not a base64 32-byte key.
    """
    if not path.exists():
        log.warning("no sealing key at %s: calls with secret arguments will be refused", path)
        return None
    return load_sealing_private_key(path)


def _timing(settings: ExecutorSettings) -> Timing:
    return Timing(
        idempotency_ttl_s=settings.idempotency_ttl_s,
        stale_grace_s=settings.stale_grace_s,
        decision_max_age_s=settings.decision_max_age_s,
        recheck_after_s=settings.recheck_after_s,
    )


def _state_names(mcp: McpToolHost) -> Callable[[], Mapping[str, str]]:
    """``server → state name`` of ``mcp``'s servers, read on each call (for readiness and the metric)."""
    return lambda: {name: server.state for name, server in mcp.states().items()}


def _mcp_checks(states: Callable[[], Mapping[str, str]] | None) -> dict[str, ReadyCheck]:
    """Report the MCP servers' states (server → ``starting``/``ready``/``unavailable``/``degraded``).

    Ready once none is ``starting`` (an unavailable server is marked, not awaited); the
    executor takes calls meanwhile, refusing a starting server's as ``tool_unavailable``.
    Without a ``states`` accessor there is nothing to report and no check.
    """
    if states is None:
        return {}
    observe_mcp_states(states)

    def mcp_servers() -> str | None:
        starting = sorted(name for name, state in states().items() if state == "starting")
        return f"MCP servers still starting: {', '.join(starting)}" if starting else None

    return {"mcp_servers": mcp_servers}


def _backoff(settings: ExecutorSettings) -> Backoff:
    return Backoff(
        first_s=settings.reconcile_backoff_s,
        max_s=settings.reconcile_max_backoff_s,
        attempts=settings.reconcile_attempts,
        max_age_s=settings.reconcile_max_age_s,
    )


def create_app(settings: ExecutorSettings | None = None) -> FastStream:
    """Build the executor service.

    Raises:
        OSError / ValueError: a key, the MCP servers file or the secrets file is missing or invalid.
        effectgate.shared.config.keyring.KeyLayoutError: ``keys_dir`` holds another service's private key.
    """
    settings = settings or ExecutorSettings()
    receipts_key = load_own_private_key(settings.keys_dir, "executor")
    keys = Keys(
        policy=public_key_of(settings.keys_dir, "policy"),
        approvals=public_key_of(settings.keys_dir, "approvals"),
    )
    unsealer = Unsealer(_sealing_key(settings.keys_dir / "sealing.key"))
    operator_key = load_public_keys(settings.keys_dir, ("operator",)).get("operator")
    servers = _servers(settings)
    redactor = _redactor(settings, servers)
    announcer = StateAnnouncer(redactor, settings.mcp_breaker_cool_down_s)
    mcp = _mcp(settings, servers, announcer) if settings.mcp_servers_file else None
    timing, instance = _timing(settings), uuid.uuid4().hex[:12]
    lease = Lease(valid_s=LEASE_VALID_S)
    file_system = FileSystemTool(settings.sandbox_root, may_write=lease.held)
    liveness = WorkerLiveness()
    file_roots = {name: config.file_root for name, config in servers.items()}
    contents = ContentReader(content_roots(settings.sandbox_root, file_roots))
    reporter = SecurityReporter("executor")
    broker = new_broker("executor", settings, reporter)
    cell: RuntimeCell[ExecutorRuntime] = RuntimeCell()
    upkept: RuntimeCell[Upkeep] = RuntimeCell()  # set once started: stopped even if the rest was never built
    tasks: list[asyncio.Task[None]] = []
    broker.include_router(build_router(cell))

    def clock() -> datetime:
        return datetime.now(UTC)

    async def build(js: JetStreamContext) -> None:
        if mcp is not None:  # the servers start now and are kept warm; calls are taken before they are all ready
            mcp.launch()
        nc = broker.connection
        bus = ScrubbingBus(StreamBus(nc, js, receipts_key), redactor)
        redis = redis_client(settings)
        store = RedisIdempotencyStore(redis)
        relay = ProgressRelay(nc, scrub=redactor.text)
        tools = LocalToolHost(file_system, mcp, PythonToolHost(nc, receipts_key, Serializer(redis), progress=relay))
        runner = Runner(
            tools, bus, clock, settings.inline_result_bytes, settings.max_result_bytes, unsealer, contents=contents
        )
        descriptors = await ToolsBucket.open(js)
        executor = Executor(
            store=store,
            bus=bus,
            descriptors=descriptors,
            runner=runner,
            permission=Permission(bus, keys.policy, clock, timing),
            claims=DurableClaims(bus, store, clock, instance, timing.idempotency_ttl_s),
            keys=keys,
            clock=clock,
            instance=instance,
            timing=timing,
            lease=lease.held,
            reporter=reporter,
        )
        limits = Deadlines(undecided_s=settings.backstop_undecided_s, margin_s=settings.backstop_margin_s)
        backstop = Backstop(executor, bus, store, keys, clock, timing, limits)
        upkeep = Upkeep(store, bus, clock, instance, timing.idempotency_ttl_s, lease=lease)
        await upkeep.start()
        upkept.set(upkeep)
        announcer.start(js)
        await liveness.start(nc, js, descriptors)
        reporter_of_contents = ContentReporter(descriptors, contents, receipts_key, clock)
        public = receipts_key.public_key()
        reconciler = Reconciler(tools, bus, descriptors, public, clock, unsealer, _backoff(settings))
        lease_of_reconciler = await leadership.bind(js, Leases.RECONCILER, "executor")
        tasks.append(asyncio.create_task(lease_of_reconciler.run(), name="executor-reconciler-lease"))
        desk = UncertainDesk(bus, operator_key, clock)
        runtime = ExecutorRuntime(
            executor, backstop, upkeep, reporter_of_contents, js, reconciler, desk, lease_of_reconciler.held
        )
        cell.set(runtime)

    def abort() -> None:
        cell().executor.abort()

    async def stop_upkeep() -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await upkept().stop()

    redis_ready = RedisReachable(redis_client(settings))
    closers = [stop_upkeep, *([mcp.aclose] if mcp else []), announcer.stop, liveness.stop, redis_ready.aclose]
    lifecycle = Lifecycle(
        consumers(cell),
        grace_s=settings.shutdown_grace_s,
        abort=abort,
        closers=closers,
        reporter=reporter,
        monitoring=monitoring("executor", settings),
        ready_checks={**_mcp_checks(_state_names(mcp) if mcp else None), "redis": redis_ready},
        fair_window=settings.fair_window,
    )
    app = new_app(broker, build, lifecycle)
    install_log_filter(redactor)
    scrub_with(redactor.text)
    return app
