"""Composition root of the executor service: the only place its settings are read."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from faststream import FastStream
from nacl.public import PrivateKey
from nats.js import JetStreamContext

from toolgate.contracts.sealing import load_sealing_private_key
from toolgate.executor.adapters.contents import ContentReader, content_roots
from toolgate.executor.adapters.file_system import FileSystemTool
from toolgate.executor.adapters.redis_idempotency import RedisIdempotencyStore
from toolgate.executor.adapters.state_announcer import StateAnnouncer
from toolgate.executor.adapters.stream import StreamBus
from toolgate.executor.adapters.tool_host import LocalToolHost
from toolgate.executor.backstop import Backstop, Deadlines
from toolgate.executor.binding import ContentReporter
from toolgate.executor.claims import DurableClaims
from toolgate.executor.handlers import ExecutorRuntime, build_router, consumers
from toolgate.executor.outlet import ScrubbingBus
from toolgate.executor.permission import Permission
from toolgate.executor.running import Runner
from toolgate.executor.service import Executor, Keys
from toolgate.executor.settings import ExecutorSettings
from toolgate.executor.timing import Timing
from toolgate.executor.unsealing import Unsealer
from toolgate.executor.upkeep import Lease, Upkeep
from toolgate.shared.config import load_servers
from toolgate.shared.connections import redis_client
from toolgate.shared.health import ReadyCheck, monitoring
from toolgate.shared.keyring import load_own_private_key, public_key_of
from toolgate.shared.log_scrubbing import install_log_filter
from toolgate.shared.mcp_config import McpServerConfig, configured_secrets
from toolgate.shared.mcp_stderr import scrub_with
from toolgate.shared.metrics import observe_mcp_states
from toolgate.shared.redaction import Redactor
from toolgate.shared.redis_ready import RedisReachable
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.secret_detectors import find_secrets
from toolgate.shared.service import Lifecycle, RuntimeCell, new_app, new_broker
from toolgate.shared.settings import deprecated_mcp_env
from toolgate.shared.tools_kv import ToolsBucket

if TYPE_CHECKING:
    from toolgate.executor.adapters.mcp_client import McpToolHost

__all__ = ["create_app"]

log = logging.getLogger("toolgate.executor")

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
    from toolgate.executor.adapters.mcp_client import McpToolHost

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


def create_app(settings: ExecutorSettings | None = None) -> FastStream:
    """Build the executor service.

    Raises:
        OSError / ValueError: a key, the MCP servers file or the secrets file is missing or invalid.
        toolgate.shared.keyring.KeyLayoutError: ``keys_dir`` holds another service's private key.
    """
    settings = settings or ExecutorSettings()
    receipts_key = load_own_private_key(settings.keys_dir, "executor")
    keys = Keys(
        policy=public_key_of(settings.keys_dir, "policy"),
        approvals=public_key_of(settings.keys_dir, "approvals"),
    )
    unsealer = Unsealer(_sealing_key(settings.keys_dir / "sealing.key"))
    servers = _servers(settings)
    redactor = _redactor(settings, servers)
    announcer = StateAnnouncer(redactor, settings.mcp_breaker_cool_down_s)
    mcp = _mcp(settings, servers, announcer) if settings.mcp_servers_file else None
    timing, instance = _timing(settings), uuid.uuid4().hex[:12]
    lease = Lease(valid_s=LEASE_VALID_S)
    tools = LocalToolHost(FileSystemTool(settings.sandbox_root, may_write=lease.held), mcp)
    file_roots = {name: config.file_root for name, config in servers.items()}
    contents = ContentReader(content_roots(settings.sandbox_root, file_roots))
    reporter = SecurityReporter("executor")
    broker = new_broker("executor", settings, reporter)
    cell: RuntimeCell[ExecutorRuntime] = RuntimeCell()
    upkept: RuntimeCell[Upkeep] = RuntimeCell()  # set once started: stopped even if the rest was never built
    broker.include_router(build_router(cell))

    def clock() -> datetime:
        return datetime.now(UTC)

    async def build(js: JetStreamContext) -> None:
        if mcp is not None:  # the servers start now and are kept warm; calls are taken before they are all ready
            mcp.launch()
        bus = ScrubbingBus(StreamBus(broker.connection, js, receipts_key), redactor)
        store = RedisIdempotencyStore(redis_client(settings))
        runner = Runner(tools, bus, clock, settings.inline_result_bytes, settings.max_result_bytes, unsealer, contents)
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
        reporter_of_contents = ContentReporter(descriptors, contents, receipts_key, clock)
        cell.set(ExecutorRuntime(executor, backstop, upkeep, reporter_of_contents))

    def abort() -> None:
        cell().executor.abort()

    async def stop_upkeep() -> None:
        await upkept().stop()

    redis_ready = RedisReachable(redis_client(settings))
    closers = [stop_upkeep, *([mcp.aclose] if mcp else []), announcer.stop, redis_ready.aclose]
    lifecycle = Lifecycle(
        consumers(cell),
        grace_s=settings.shutdown_grace_s,
        abort=abort,
        closers=closers,
        reporter=reporter,
        monitoring=monitoring("executor", settings),
        ready_checks={**_mcp_checks(_state_names(mcp) if mcp else None), "redis": redis_ready},
    )
    app = new_app(broker, build, lifecycle)
    install_log_filter(redactor)
    scrub_with(redactor.text)
    return app
