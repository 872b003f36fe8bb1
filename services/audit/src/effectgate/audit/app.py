"""Composition root of the audit service: the only place its settings are read."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import nats
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from faststream import FastStream
from nats.js import JetStreamContext

from effectgate.audit.adapters.sqlite import SqliteAuditStore
from effectgate.audit.adapters.stream_reads import next_reader
from effectgate.audit.errors import AuditError
from effectgate.audit.handlers import build_router, consumers
from effectgate.audit.service import Audit
from effectgate.audit.settings import AuditSettings
from effectgate.contracts.bus.catalog import AUDIT_CONSUMER, STREAM, Leases
from effectgate.contracts.integrity.signing import load_public_key
from effectgate.shared.config.bus import BusSettings
from effectgate.shared.config.keyring import HOLDERS, check_holds_only_own
from effectgate.shared.runtime import leadership
from effectgate.shared.runtime.assembly import Lifecycle, RuntimeCell, new_app, new_broker
from effectgate.shared.runtime.health import monitoring
from effectgate.shared.runtime.reporting import SecurityReporter
from effectgate.shared.stores.record_usage import RecordUsage

__all__ = ["create_app"]

log = logging.getLogger("effectgate.audit")


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


def _stream_bound(js: JetStreamContext, which: str) -> Callable[[], Awaitable[int | None]]:
    """Reads the stream's ``first_seq`` or ``last_seq``; ``None`` when the stream cannot be read."""

    async def read() -> int | None:
        try:
            return int(getattr((await js.stream_info(STREAM)).state, which))
        except (nats.errors.Error, OSError):
            return None

    return read


def _taking_over(audit: Audit) -> Callable[[bool], Awaitable[None]]:
    """On taking the writer's lease: record its token in the chain at once, so an older writer appends no more."""

    async def on_change(held: bool) -> None:
        writer = audit.writer()
        if held and writer:
            try:
                await audit.store.take_over(writer)
            except AuditError as error:  # the first append records it too
                log.warning("could not record writer token %s yet: %s", writer[0], error)

    return on_change


def create_app(settings: AuditSettings | None = None) -> FastStream:
    """Build the audit service.

    Raises:
        effectgate.audit.errors.StoreError (at start-up): the database cannot be opened.
        effectgate.shared.config.keyring.KeyLayoutError: ``keys_dir`` holds a private key.
        ValueError: a public key in ``keys_dir`` is invalid (a missing one leaves its events unverifiable).
    """
    settings = settings or AuditSettings()
    check_holds_only_own(settings.keys_dir, "audit")
    keys, reporter = _public_keys(settings.keys_dir), SecurityReporter("audit")
    broker = new_broker("audit", settings, reporter)
    cell: RuntimeCell[Audit] = RuntimeCell()
    broker.include_router(build_router(cell))
    tasks: list[asyncio.Task[None]] = []

    async def build(js: JetStreamContext) -> None:
        stream_last_seq, stream_first_seq = _stream_bound(js, "last_seq"), _stream_bound(js, "first_seq")

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
        lease = await leadership.bind(js, Leases.AUDIT_WRITER, "audit")
        audit = Audit(
            store, stream_last_seq, keys, reporter, announce, stream_message, read_next, lease, stream_first_seq
        )
        cell.set(audit)
        tasks.append(asyncio.create_task(lease.run(_taking_over(audit)), name="audit-writer-lease"))
        room.set(RecordUsage(js, high_water))  # reported in /readyz; the policy raises the alarm

    async def close() -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await cell().store.close()

    room: RuntimeCell[RecordUsage] = RuntimeCell()
    high_water = BusSettings(config_file=settings.config_file).store_high_water
    plan = Lifecycle(
        consumers(cell),
        closers=[close],
        reporter=reporter,
        monitoring=monitoring("audit", settings),
        ready_checks={"record_store": lambda: room().ready()},
        probes=[lambda: room().probe()],
    )
    return new_app(broker, build, plan)
