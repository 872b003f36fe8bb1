"""The audit service over its store: a request's trail, the full check, and watching for forgeries.

Each newly recorded message is inspected (:mod:`effectgate.audit.sentinel`): a forgery on a
signed subject is reported as a security event (which comes back through the stream and is
recorded in turn), and a recorded security event is announced as an alarm on
``tg.alarm.<kind>``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.audit.anchoring import Anchoring, StreamMessage
from effectgate.audit.domain import AuditRecord
from effectgate.audit.gaps import ReadNext
from effectgate.audit.ports import AuditStore, Writer
from effectgate.audit.sentinel import alarm_of, forgery
from effectgate.audit.signatures import SignatureCheck
from effectgate.audit.summaries import summarize
from effectgate.contracts.bus.catalog import Subjects, request_subject_of
from effectgate.contracts.rpc.audit import (
    EXPORT_PAGE,
    MAX_ALARMS,
    MAX_REQUESTS,
    AlarmsReply,
    ExportQuery,
    ExportReply,
    RequestsQuery,
    RequestsReply,
    StreamRange,
    TrailReply,
    VerifyReply,
)
from effectgate.shared.runtime.leadership import Leadership
from effectgate.shared.runtime.reporting import SecurityReporter

__all__ = ["Audit"]

log = logging.getLogger("effectgate.audit")

Announce = Callable[[str, bytes], Awaitable[None]]


async def _nowhere(subject: str, data: bytes) -> None:
    """Announce nothing (no bus)."""


async def _gone(seq: int) -> None:
    """No stream to read."""


def _utc_text(moment: datetime) -> str:
    """``moment`` as events write it (msgspec: ``2026-01-02T03:04:05.123456Z``), so texts compare as times."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return msgspec.json.encode(moment.astimezone(UTC)).decode().strip('"')


@dataclass
class Audit:
    """The store, how to ask the stream for its last sequence, and how to raise alarms.

    Attributes:
        store: the chain.
        stream_last_seq: the stream's last sequence, ``None`` when it cannot be read.
        keys: public keys by name (``policy``, ``approvals``, ``receipts``): intake and ``verify`` check signatures.
        reporter: reports forgeries seen on intake.
        announce: ``announce(subject, body)`` on core NATS (alarms).
        stream_message: reads one stream message (:mod:`effectgate.audit.anchoring`); ``None``: not compared.
        read_next: the audit consumer's first stream message at or after a sequence
            (:mod:`effectgate.audit.gaps`); ``None``: a gap before a batch is not filled.
        leadership: the writer's lease (``Leases.AUDIT_WRITER``): only its holder appends, with
            its fencing token; ``None``: this replica appends alone, without a lease.
        stream_first_seq: the stream's first kept sequence, ``None`` when it cannot be read
            (``verify`` names the records missing before the chain's first).
    """

    store: AuditStore
    stream_last_seq: Callable[[], Awaitable[int | None]]
    keys: Mapping[str, Ed25519PublicKey] = field(default_factory=dict)
    reporter: SecurityReporter = field(default_factory=lambda: SecurityReporter("audit"))
    announce: Announce = _nowhere
    stream_message: StreamMessage | None = None
    read_next: ReadNext | None = None
    leadership: Leadership | None = None
    stream_first_seq: Callable[[], Awaitable[int | None]] | None = None

    def writer(self) -> Writer | None | Literal[False]:
        """Who appends: ``(token, holder)`` while holding the writer's lease, else ``False``.

        ``None`` when this replica runs without a lease (alone: tests, tools).
        """
        if self.leadership is None:
            return None
        token = self.leadership.token
        return (token, self.leadership.holder) if token is not None and self.leadership.held() else False

    async def trail(self, request_id: str) -> TrailReply:
        """Every record of one request, in bus order."""
        records = await self.store.trail(request_id)
        return TrailReply(ok=True, reason=f"{len(records)} records", records=records)

    async def verify(self) -> VerifyReply:
        """Check the chain's links and signatures, each record against its stream message, coverage and order."""
        signatures = SignatureCheck(self.keys)
        result = await self.store.verify(signatures)
        missing, audited_last = await self.store.coverage()
        disordered = await self.store.out_of_order()
        anchoring = await self._anchoring()
        stream_last = await self.stream_last_seq()
        at_start = await self._missing_at_start(stream_last)
        faults = missing or at_start or disordered or signatures.count or anchoring.differing_count
        return VerifyReply(
            ok=result.ok and not faults,
            missing_at_start=at_start,
            differing_from_stream=anchoring.differing,
            differing_count=anchoring.differing_count,
            unanchored=anchoring.unanchored,
            bad_signatures=signatures.faults,
            bad_signature_count=signatures.count,
            result=result,
            total=await self.store.count(),
            missing_stream_seqs=missing,
            out_of_stream_order=disordered,
            audited_last_seq=audited_last,
            stream_last_seq=stream_last,
        )

    async def _missing_at_start(self, stream_last: int | None) -> StreamRange | None:
        """The stream's kept messages before the chain's first record.

        An empty chain misses nothing yet: it is behind (``audited_last_seq`` says how far), and
        its first append begins at the stream's first kept message (:mod:`effectgate.audit.gaps`).
        """
        stream_first = None if self.stream_first_seq is None else await self.stream_first_seq()
        chain_first = await self.store.first_stream_seq()
        if stream_first is None or stream_last is None or chain_first is None:
            return None
        last = min(chain_first - 1, stream_last)
        return StreamRange(first=stream_first, last=last) if last >= stream_first else None

    async def _anchoring(self) -> Anchoring:
        anchoring = Anchoring(self.stream_message or _gone)
        if self.stream_message is not None:
            await anchoring.check(self._all_records())
        return anchoring

    async def _all_records(self) -> AsyncIterator[AuditRecord]:
        after = 0
        while page := await self.store.page(after, EXPORT_PAGE):
            for record in page:
                yield record
            after = page[-1].sequence

    async def export(self, query: ExportQuery) -> ExportReply:
        """One page of the chain (``1 <= limit <= EXPORT_PAGE``), for ``effectgate audit export``."""
        if not 1 <= query.limit <= EXPORT_PAGE or query.after < 0:
            return ExportReply(ok=False, reason=f"limit must be 1..{EXPORT_PAGE} and after >= 0")
        records = _within(await self.store.page(query.after, query.limit), EXPORT_PAGE_BYTES)
        return ExportReply(ok=True, reason=f"{len(records)} records", records=records)

    async def requests(self, query: RequestsQuery) -> RequestsReply:
        """The most recent requests (newest first) and how each ended; a refusal for a limit out of range."""
        if not 1 <= query.limit <= MAX_REQUESTS:
            return RequestsReply(ok=False, reason=f"limit must be between 1 and {MAX_REQUESTS}, not {query.limit}")
        since = None if query.since is None else _utc_text(query.since)
        found = await self.store.requests(query.principal, since, query.limit)
        summaries = [summarize(request, later) for request, later in found]
        return RequestsReply(ok=True, reason=f"{len(summaries)} requests", requests=summaries)

    async def alarms(self, limit: int) -> AlarmsReply:
        """The ``limit`` most recent security events, oldest first; a refusal for a limit out of range."""
        if not 1 <= limit <= MAX_ALARMS:
            return AlarmsReply(ok=False, reason=f"limit must be between 1 and {MAX_ALARMS}, not {limit}")
        records = await self.store.security_records(limit)
        alarms = [alarm for alarm in map(alarm_of, reversed(records)) if alarm is not None]
        return AlarmsReply(ok=True, reason=f"{len(alarms)} security events", alarms=alarms)

    async def inspect(self, record: AuditRecord, data: bytes) -> None:
        """Report a forgery in a newly recorded message; announce a newly recorded security event."""
        found = forgery(record.subject, data, self.keys)
        if found is not None:
            named = request_subject_of(record.subject)
            self.reporter.report(
                found.rule.kind,
                principal=None if named is None else named.principal,
                request_id=None if named is None else named.request_id,
                subject=record.subject,
                detail=f"recorded at audit sequence {record.sequence}: {found.detail}",
                payload=data,
            )
        alarm = alarm_of(record)
        if alarm is not None:
            try:
                await self.announce(Subjects.alarm(alarm.event.kind.value), msgspec.json.encode(alarm))
            except Exception as error:  # logged: the record is kept, the alarm is listed by tg.audit.alarms
                log.error("could not announce the alarm of record %d: %s", record.sequence, type(error).__name__)


EXPORT_PAGE_BYTES = 512 * 1024
"""Most bytes of records one export page carries (half the usual NATS ``max_payload``): a page
of large records is cut short, and the caller asks again after its last record."""


def _within(records: list[AuditRecord], budget_bytes: int) -> list[AuditRecord]:
    """The first of ``records`` whose JSON fits in ``budget_bytes`` together; always at least one."""
    kept: list[AuditRecord] = []
    used = 0
    for record in records:
        used += len(msgspec.json.encode(record))
        if kept and used > budget_bytes:
            break
        kept.append(record)
    return kept
