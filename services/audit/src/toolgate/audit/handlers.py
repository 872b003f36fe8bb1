"""The audit service's broker edge: every stream event in; trail, verify, export and alarms answered."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TypeVar

import msgspec
from faststream.nats import NatsMessage, NatsRouter

from toolgate.audit.domain import AuditEntry, AuditRecord
from toolgate.audit.intake import entry_of
from toolgate.audit.queries import ExportQuery, ExportReply, RequestsQuery, RequestsReply, TrailQuery, TrailReply
from toolgate.audit.service import Audit
from toolgate.contracts import catalog
from toolgate.contracts.catalog import Rpc
from toolgate.contracts.events import decode_untrusted
from toolgate.shared.alarms import AlarmsQuery, AlarmsReply
from toolgate.shared.handling import Consumer, Delivery, Settle, Settlement
from toolgate.shared.metrics import record_appended
from toolgate.shared.request_log import note
from toolgate.shared.service import RuntimeCell, rpc

__all__ = ["build_router", "consumers", "note_appended"]

Q = TypeVar("Q")
_trail = msgspec.json.Decoder(TrailQuery)
_export = msgspec.json.Decoder(ExportQuery)
_alarms = msgspec.json.Decoder(AlarmsQuery)
_requests = msgspec.json.Decoder(RequestsQuery)


def consumers(cell: RuntimeCell[Audit]) -> list[Consumer]:
    """Every stream event into the chain, in stream order; an event is never given up.

    A newly recorded event is inspected (forgeries reported, security events announced);
    a redelivered one was inspected when it was recorded. Each is one request line
    (:func:`note_appended`).
    """

    async def on_event(delivery: Delivery) -> Settlement:
        now = datetime.now(UTC).isoformat()
        msg_id = delivery.headers.get("Nats-Msg-Id")
        audit = cell()
        entry = entry_of(delivery.subject, delivery.data, msg_id, delivery.stream_seq, now)
        record = await audit.store.append(entry)
        record_appended(delivery.stored_at)
        if record is not None:
            await audit.inspect(record, delivery.data)
        note_appended(entry, record)
        return Settle.ACK

    return [Consumer(catalog.AUDIT_CONSUMER, on_event, give_up=None, max_workers=1)]


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
