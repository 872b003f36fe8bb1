"""Composition root of the audit service: the only place its settings are read."""

from __future__ import annotations

import logging
from pathlib import Path

import nats
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from faststream import FastStream
from nats.js import JetStreamContext

from toolgate.audit.adapters.sqlite import SqliteAuditStore
from toolgate.audit.adapters.stream_reads import next_reader
from toolgate.audit.handlers import build_router, consumers
from toolgate.audit.service import Audit
from toolgate.audit.settings import AuditSettings
from toolgate.contracts.catalog import AUDIT_CONSUMER, STREAM
from toolgate.contracts.signing import load_public_key
from toolgate.shared.health import monitoring
from toolgate.shared.keyring import HOLDERS, check_holds_only_own
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.service import Lifecycle, RuntimeCell, new_app, new_broker

__all__ = ["create_app"]

log = logging.getLogger("toolgate.audit")


def _public_keys(keys_dir: Path) -> dict[str, Ed25519PublicKey]:
    """The public keys of the signed subjects that are present; a missing one leaves its subjects unchecked.

    Raises:
        OSError / ValueError: a key file is present but unreadable or not a key.
    """
    keys = {}
    for name in HOLDERS["audit"].verifies:
        path = keys_dir / f"{name}.pub"
        if path.exists():
            keys[name] = load_public_key(path)
        else:
            log.warning("no %s: events signed by the %s key cannot be verified (verify names them)", path, name)
    return keys


def create_app(settings: AuditSettings | None = None) -> FastStream:
    """Build the audit service.

    Raises:
        toolgate.audit.errors.StoreError (at start-up): the database cannot be opened.
        toolgate.shared.keyring.KeyLayoutError: ``keys_dir`` holds a private key.
        ValueError: a public key in ``keys_dir`` is invalid (a missing one leaves its events unverifiable).
    """
    settings = settings or AuditSettings()
    check_holds_only_own(settings.keys_dir, "audit")
    keys, reporter = _public_keys(settings.keys_dir), SecurityReporter("audit")
    broker = new_broker("audit", settings, reporter)
    cell: RuntimeCell[Audit] = RuntimeCell()
    broker.include_router(build_router(cell))

    async def build(js: JetStreamContext) -> None:
        async def stream_last_seq() -> int | None:
            try:
                return int((await js.stream_info(STREAM)).state.last_seq)
            except (nats.errors.Error, OSError):
                return None

        async def announce(subject: str, body: bytes) -> None:
            await broker.connection.publish(subject, body)

        async def stream_message(seq: int) -> tuple[str, bytes, str | None] | None:
            try:
                message = await js.get_msg(STREAM, seq)
            except nats.js.errors.NotFoundError:
                return None
            return message.subject or "", message.data or b"", (message.headers or {}).get("Nats-Msg-Id")

        store = SqliteAuditStore(settings.database)
        read_next = next_reader(js, AUDIT_CONSUMER.filter_subject)
        cell.set(Audit(store, stream_last_seq, keys, reporter, announce, stream_message, read_next))

    async def close() -> None:
        await cell().store.close()

    plan = Lifecycle(consumers(cell), closers=[close], reporter=reporter, monitoring=monitoring("audit", settings))
    return new_app(broker, build, plan)
