"""Composition root of the executor service: the only place its settings are read."""

from __future__ import annotations

from datetime import UTC, datetime

from faststream import FastStream
from nats.js import JetStreamContext

from toolgate.executor.adapters.file_system import FileSystemTool
from toolgate.executor.adapters.mcp_client import McpToolHost
from toolgate.executor.adapters.redis_idempotency import RedisIdempotencyStore
from toolgate.executor.adapters.tool_host import LocalToolHost
from toolgate.executor.handlers import build_router
from toolgate.executor.service import Executor
from toolgate.executor.settings import ExecutorSettings
from toolgate.shared.bus import fetch_last, publish_once
from toolgate.shared.catalog import EXECUTOR_DECISIONS, Subjects
from toolgate.shared.connections import redis_client
from toolgate.shared.events import DecisionMade, ReceiptIssued
from toolgate.shared.mcp_config import load_mcp_servers
from toolgate.shared.service import RuntimeCell, new_app, new_broker
from toolgate.shared.signing import load_public_key
from toolgate.shared.tools_kv import ToolsBucket

__all__ = ["create_app"]


def _mcp(settings: ExecutorSettings) -> McpToolHost | None:
    if settings.mcp_servers_file is None:
        return None
    return McpToolHost(load_mcp_servers(settings.mcp_servers_file))


def create_app(settings: ExecutorSettings | None = None) -> FastStream:
    """Build the executor service.

    Raises:
        OSError / ValueError: a public key or the MCP servers file is missing or invalid.
    """
    settings = settings or ExecutorSettings()
    policy_key = load_public_key(settings.keys_dir / "policy.pub")
    approvals_key = load_public_key(settings.keys_dir / "approvals.pub")
    mcp = _mcp(settings)
    tools = LocalToolHost(FileSystemTool(settings.sandbox_root.resolve()), mcp)
    broker = new_broker("executor", settings)
    cell: RuntimeCell[Executor] = RuntimeCell()
    broker.include_router(build_router(cell))

    async def build(js: JetStreamContext) -> None:
        async def publish(subject: str, issued: ReceiptIssued) -> object:
            return await publish_once(js, subject, issued)

        async def fetch_decision(principal: str, request_id: str) -> DecisionMade | None:
            found = await fetch_last(js, Subjects.decision(principal, request_id))
            return found if isinstance(found, DecisionMade) else None

        async def fetch_receipt(principal: str, request_id: str) -> ReceiptIssued | None:
            found = await fetch_last(js, Subjects.receipt(principal, request_id))
            return found if isinstance(found, ReceiptIssued) else None

        cell.set(
            Executor(
                store=RedisIdempotencyStore(redis_client(settings)),
                descriptors=await ToolsBucket.open(js),
                tools=tools,
                policy_key=policy_key,
                approvals_key=approvals_key,
                publish=publish,
                fetch_decision=fetch_decision,
                fetch_receipt=fetch_receipt,
                clock=lambda: datetime.now(UTC),
                idempotency_ttl_s=settings.idempotency_ttl_s,
                stale_grace_s=settings.stale_grace_s,
                decision_max_age_s=settings.decision_max_age_s,
                last_delivery=EXECUTOR_DECISIONS.max_deliver - 1,
            )
        )

    app = new_app(broker, build)
    if mcp is not None:
        app.on_shutdown(mcp.aclose)
    return app
