"""Composition root of the audit service: the only place its settings are read."""

from __future__ import annotations

import nats
from faststream import FastStream
from nats.js import JetStreamContext

from toolgate.audit.adapters.sqlite import SqliteAuditStore
from toolgate.audit.handlers import build_router, consumers
from toolgate.audit.service import Audit
from toolgate.audit.settings import AuditSettings
from toolgate.shared.catalog import STREAM
from toolgate.shared.keyring import HOLDERS, check_holds_only_own, load_public_keys
from toolgate.shared.service import Lifecycle, RuntimeCell, new_app, new_broker

__all__ = ["create_app"]


def create_app(settings: AuditSettings | None = None) -> FastStream:
    """Build the audit service.

    Raises:
        toolgate.audit.errors.StoreError (at start-up): the database cannot be opened.
        toolgate.shared.keyring.KeyLayoutError: ``keys_dir`` holds a private key.
        ValueError: a public key in ``keys_dir`` is invalid (a missing one leaves its events unverifiable).
    """
    settings = settings or AuditSettings()
    check_holds_only_own(settings.keys_dir, "audit")
    keys = load_public_keys(settings.keys_dir, HOLDERS["audit"].verifies)
    broker = new_broker("audit", settings)
    cell: RuntimeCell[Audit] = RuntimeCell()
    broker.include_router(build_router(cell))

    async def build(js: JetStreamContext) -> None:
        async def stream_last_seq() -> int | None:
            try:
                return int((await js.stream_info(STREAM)).state.last_seq)
            except (nats.errors.Error, OSError):
                return None

        store = SqliteAuditStore(settings.database)
        cell.set(Audit(store=store, stream_last_seq=stream_last_seq, keys=keys))

    async def close() -> None:
        await cell().store.close()

    return new_app(broker, build, Lifecycle(consumers=consumers(cell), closers=[close]))
