"""Composition root of the executor service: the only place its settings are read."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from faststream import FastStream
from nats.js import JetStreamContext

from toolgate.executor.adapters.file_system import FileSystemTool
from toolgate.executor.adapters.mcp_client import McpToolHost
from toolgate.executor.adapters.redis_idempotency import RedisIdempotencyStore
from toolgate.executor.adapters.secret_detectors import find_secrets
from toolgate.executor.adapters.stream import StreamBus
from toolgate.executor.adapters.tool_host import LocalToolHost
from toolgate.executor.backstop import Backstop, Deadlines
from toolgate.executor.claims import DurableClaims
from toolgate.executor.handlers import ExecutorRuntime, consumers
from toolgate.executor.outlet import ScrubbingBus, install_log_filter
from toolgate.executor.permission import Permission
from toolgate.executor.redaction import Redactor
from toolgate.executor.running import Runner
from toolgate.executor.service import Executor, Keys
from toolgate.executor.settings import ExecutorSettings
from toolgate.executor.timing import Timing
from toolgate.executor.upkeep import Lease, Upkeep
from toolgate.shared.connections import redis_client
from toolgate.shared.mcp_config import McpServerConfig, load_mcp_servers
from toolgate.shared.service import Lifecycle, RuntimeCell, new_app, new_broker
from toolgate.shared.signing import load_public_key
from toolgate.shared.tools_kv import ToolsBucket

__all__ = ["create_app"]

LEASE_VALID_S = 3.0
"""An executor acts on its heartbeat for 3 s; others take it for dead after 5 s without one."""


def _servers(settings: ExecutorSettings) -> dict[str, McpServerConfig]:
    return load_mcp_servers(settings.mcp_servers_file) if settings.mcp_servers_file else {}


def _redactor(settings: ExecutorSettings, servers: dict[str, McpServerConfig]) -> Redactor:
    """The secret rules: the detectors, and the MCP servers' env values and the secrets file exactly."""
    known = [value for config in servers.values() for value in config.env.values()]
    if settings.secrets_file is not None:
        known += [line for line in settings.secrets_file.read_text(encoding="utf-8").splitlines() if line]
    return Redactor(find_secrets, known)


def _timing(settings: ExecutorSettings) -> Timing:
    return Timing(
        idempotency_ttl_s=settings.idempotency_ttl_s,
        stale_grace_s=settings.stale_grace_s,
        decision_max_age_s=settings.decision_max_age_s,
        recheck_after_s=settings.recheck_after_s,
    )


def create_app(settings: ExecutorSettings | None = None) -> FastStream:
    """Build the executor service.

    Raises:
        OSError / ValueError: a public key, the MCP servers file or the secrets file is missing
            or invalid.
    """
    settings = settings or ExecutorSettings()
    keys = Keys(
        policy=load_public_key(settings.keys_dir / "policy.pub"),
        approvals=load_public_key(settings.keys_dir / "approvals.pub"),
    )
    servers = _servers(settings)
    redactor = _redactor(settings, servers)
    mcp = McpToolHost(servers) if settings.mcp_servers_file else None
    timing, instance = _timing(settings), uuid.uuid4().hex[:12]
    lease = Lease(valid_s=LEASE_VALID_S)
    tools = LocalToolHost(FileSystemTool(settings.sandbox_root.resolve(), may_write=lease.held), mcp)
    broker = new_broker("executor", settings)
    cell: RuntimeCell[ExecutorRuntime] = RuntimeCell()

    def clock() -> datetime:
        return datetime.now(UTC)

    async def build(js: JetStreamContext) -> None:
        bus = ScrubbingBus(StreamBus(broker.connection, js), redactor)
        store = RedisIdempotencyStore(redis_client(settings))
        runner = Runner(tools, bus, clock, settings.inline_result_bytes, settings.max_result_bytes)
        executor = Executor(
            store=store,
            bus=bus,
            descriptors=await ToolsBucket.open(js),
            runner=runner,
            permission=Permission(bus, keys.policy, clock, timing),
            claims=DurableClaims(bus, store, clock, instance, timing.idempotency_ttl_s),
            keys=keys,
            clock=clock,
            instance=instance,
            timing=timing,
            lease=lease.held,
        )
        limits = Deadlines(undecided_s=settings.backstop_undecided_s, margin_s=settings.backstop_margin_s)
        backstop = Backstop(executor, bus, store, keys, clock, timing, limits)
        upkeep = Upkeep(store, bus, clock, instance, timing.idempotency_ttl_s, lease=lease)
        await upkeep.start()
        cell.set(ExecutorRuntime(executor, backstop, upkeep))

    def abort() -> None:
        cell().executor.abort()

    async def stop_upkeep() -> None:
        await cell().upkeep.stop()

    closers = [stop_upkeep, *([mcp.aclose] if mcp else [])]
    lifecycle = Lifecycle(consumers(cell), grace_s=settings.shutdown_grace_s, abort=abort, closers=closers)
    app = new_app(broker, build, lifecycle)
    install_log_filter(redactor)
    return app
