"""The audit service's broker edge: every stream event in; trail, verify, export and alarms answered."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TypeVar

import msgspec
from faststream.nats import NatsMessage, NatsRouter

from effectgate.audit.domain import AuditEntry, AuditRecord
from effectgate.audit.gaps import in_stream_order
from effectgate.audit.intake import entry_of
from effectgate.audit.service import Audit
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.events import decode_untrusted
from effectgate.contracts.rpc.audit import (
    AlarmsQuery,
    AlarmsReply,
    ExportQuery,
    ExportReply,
    RequestsQuery,
    RequestsReply,
    TrailQuery,
    TrailReply,
)
from effectgate.shared.consumer.consumers import Consumer, Delivery
from effectgate.shared.consumer.request_log import note
from effectgate.shared.consumer.worker import Settle, Settlement, message_scope
from effectgate.shared.runtime.assembly import RuntimeCell, rpc
from effectgate.shared.runtime.metrics import record_appended

__all__ = ["build_router", "consumers", "note_appended"]

log = logging.getLogger("effectgate.audit")

BATCH_LINGER_S = 0.05
"""After a short batch, how long the audit lets events gather before fetching again, seconds."""

Q = TypeVar("Q")
_trail = msgspec.json.Decoder(TrailQuery)
_export = msgspec.json.Decoder(ExportQuery)
_alarms = msgspec.json.Decoder(AlarmsQuery)
_requests = msgspec.json.Decoder(RequestsQuery)


def consumers(cell: RuntimeCell[Audit]) -> list[Consumer]:
    """Every stream event into the chain, in stream order, in batches; an event is never given up.

    The messages of one fetch are appended in one transaction (``append_batch``); a batch
    whose append fails is retried whole, in place, and a redelivered message appends nothing.
    Then, each in its own request line and span: a newly recorded event is inspected
    (forgeries reported, security events announced; a redelivered one was inspected when it
    was recorded) and noted (:func:`note_appended`).
    """
    durable = catalog.AUDIT_CONSUMER.durable

    async def on_events(deliveries: Sequence[Delivery]) -> list[Settlement]:
        audit, now = cell(), datetime.now(UTC).isoformat()
        writer = audit.writer()
        if writer is False:
            return [Settle.RETRY] * len(deliveries)  # not the writer (any more): handed back
        appended: set[int] = set()
        while rest := [delivery for delivery in deliveries if delivery.stream_seq not in appended]:
            ordered = await _with_gaps_filled(audit, rest)
            entries = [_entry(delivery, now) for delivery in ordered]
            records = await audit.store.append_batch(entries, writer)
            record_appended(ordered[-1].stored_at)
            for delivery, entry, record in zip(ordered, entries, records, strict=True):
                with message_scope(durable, delivery.subject, delivery.headers):
                    await _inspected(audit, delivery, record)
                    note_appended(entry, record)
            appended |= {delivery.stream_seq for delivery in ordered}
        return [Settle.ACK] * len(deliveries)

    async def on_event(delivery: Delivery) -> Settlement:
        return (await on_events([delivery]))[0]

    return [
        Consumer(
            catalog.AUDIT_CONSUMER,
            on_event,
            give_up=None,
            max_workers=1,
            handle_batch=on_events,
            batch_linger_s=BATCH_LINGER_S,
            active=lambda: cell().writer() is not False,
        )
    ]


async def _with_gaps_filled(audit: Audit, deliveries: Sequence[Delivery]) -> list[Delivery]:
    """The batch, with the messages missing before it read from the stream (:mod:`effectgate.audit.gaps`)."""
    if audit.read_next is None:
        return list(deliveries)
    return await in_stream_order(deliveries, await audit.store.last_stream_seq(), audit.read_next)


def _entry(delivery: Delivery, received_at: str) -> AuditEntry:
    msg_id = delivery.headers.get("Nats-Msg-Id")
    return entry_of(delivery.subject, delivery.data, msg_id, delivery.stream_seq, received_at)


async def _inspected(audit: Audit, delivery: Delivery, record: AuditRecord | None) -> None:
    """Inspect a newly recorded event; a failure is logged and the record stays (the next event is still inspected)."""
    if record is None:
        return
    try:
        await audit.inspect(record, delivery.data)
    except Exception:
        log.error("could not inspect record %d (stream seq %d)", record.sequence, record.stream_seq, exc_info=True)


def note_appended(entry: AuditEntry, record: AuditRecord | None) -> None:
    """The request line: the event recorded and its chain ``seq`` (none when it was recorded before)."""
    note(
        "appended" if record is not None else "recorded before",
        event=entry.event_type,
        request_id=entry.request_id,
        principal=entry.principal,
        seq=record.sequence if record is not None else None,
        stream_seq=entry.stream_seq,
    )


def _query(decoder: msgspec.json.Decoder[Q], msg: NatsMessage, what: str) -> Q | str:
    """The decoded query, or why the body is not one (a refusal, never an exception)."""
    try:
        return decode_untrusted(decoder, msg.raw_message.data or b"")
    except msgspec.DecodeError as error:
        return f"not {what}: {error}"


def build_router(cell: RuntimeCell[Audit]) -> NatsRouter:
    """Route the queries (trail, verify, export, alarms, requests) to the store."""
    router = NatsRouter()

    @rpc(router, Rpc.AUDIT_TRAIL, "audit")
    async def on_trail(msg: NatsMessage) -> bytes:
        query = _query(_trail, msg, "a trail query")
        if isinstance(query, str):
            return msgspec.json.encode(TrailReply(ok=False, reason=query))
        return msgspec.json.encode(await cell().trail(query.request_id))

    @rpc(router, Rpc.AUDIT_ALARMS, "audit")
    async def on_alarms(msg: NatsMessage) -> bytes:
        query = _query(_alarms, msg, "an alarms query")
        if isinstance(query, str):
            return msgspec.json.encode(AlarmsReply(ok=False, reason=query))
        return msgspec.json.encode(await cell().alarms(query.limit))

    @rpc(router, Rpc.AUDIT_VERIFY, "audit")
    async def on_verify(msg: NatsMessage) -> bytes:
        return msgspec.json.encode(await cell().verify())

    @rpc(router, Rpc.AUDIT_EXPORT, "audit")
    async def on_export(msg: NatsMessage) -> bytes:
        query = _query(_export, msg, "an export query")
        if isinstance(query, str):
            return msgspec.json.encode(ExportReply(ok=False, reason=query))
        return msgspec.json.encode(await cell().export(query))

    @rpc(router, Rpc.AUDIT_REQUESTS, "audit")
    async def on_requests(msg: NatsMessage) -> bytes:
        query = _query(_requests, msg, "a requests query")
        if isinstance(query, str):
            return msgspec.json.encode(RequestsReply(ok=False, reason=query))
        return msgspec.json.encode(await cell().requests(query))

    return router
