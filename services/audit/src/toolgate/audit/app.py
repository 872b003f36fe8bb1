"""Composition root of the audit service: the only place its settings are read."""

from __future__ import annotations

from faststream import FastStream
from nats.js import JetStreamContext

from toolgate.audit.adapters.sqlite import SqliteAuditStore
from toolgate.audit.handlers import build_router
from toolgate.audit.settings import AuditSettings
from toolgate.shared.service import RuntimeCell, new_app, new_broker

__all__ = ["create_app"]


def create_app(settings: AuditSettings | None = None) -> FastStream:
    """Build the audit service.

    Raises:
        toolgate.audit.errors.StoreError (at start-up): the database cannot be opened.
    """
    settings = settings or AuditSettings()
    broker = new_broker("audit", settings)
    cell: RuntimeCell[SqliteAuditStore] = RuntimeCell()
    broker.include_router(build_router(cell))

    async def build(js: JetStreamContext) -> None:
        cell.set(SqliteAuditStore(settings.database))

    app = new_app(broker, build)

    @app.after_shutdown
    async def close() -> None:
        await cell().close()

    return app
