"""SQLite store for the audit hash chain.

One ``sqlite3`` connection in WAL mode, guarded by a lock; every blocking call runs in
a worker thread through :func:`asyncio.to_thread`. An append reads the last record and
inserts its successors (one event, or a batch of them in order) inside one
``BEGIN IMMEDIATE`` transaction, so concurrent appends (from this process or another on
the same file) cannot fork the chain, and a batch is stored whole or not at all.
Records are keyed by chain position (``sequence``); the JetStream stream sequence is
unique, which makes redelivered events no-ops.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from toolgate.audit.domain import AuditEntry, AuditRecord, VerifyResult, next_record, verify_chain
from toolgate.audit.errors import StoreError
from toolgate.audit.signatures import SignatureCheck

__all__ = ["SqliteAuditStore"]

_T = TypeVar("_T")

_NAMES = AuditRecord.__struct_fields__
_COLUMNS = ", ".join(_NAMES)
_MARKS = ", ".join("?" * len(_NAMES))

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit_records (
    sequence    INTEGER PRIMARY KEY,
    stream_seq  INTEGER NOT NULL UNIQUE,
    subject     TEXT NOT NULL,
    event_type  TEXT NOT NULL,
    request_id  TEXT,
    principal   TEXT,
    occurred_at TEXT NOT NULL,
    payload     TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_records_request_id ON audit_records (request_id, sequence);
CREATE INDEX IF NOT EXISTS audit_records_event_type ON audit_records (event_type, sequence);
"""

_FETCH_ROWS = 500


def _record(row: tuple[Any, ...]) -> AuditRecord:
    """Build a record from a row selected as ``_COLUMNS``."""
    return AuditRecord(**dict(zip(_NAMES, row, strict=True)))


class SqliteAuditStore:
    """The audit chain in one SQLite file.

    Args:
        path: the database file; created with its table and index when absent.
        timeout_s: how long a write waits for another process's lock, in seconds.

    Raises:
        StoreError: the database cannot be opened or its schema created.
    """

    def __init__(self, path: Path, *, timeout_s: float = 5.0) -> None:
        self._path = str(path)
        self._lock = threading.Lock()
        self._closed = False
        try:
            self._conn = sqlite3.connect(self._path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(self._path, "unavailable", str(exc)) from exc
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(_SCHEMA)
            self._top: int | None = self._conn.execute("SELECT MAX(stream_seq) FROM audit_records").fetchone()[0]
        except sqlite3.Error as exc:
            self._conn.close()
            raise StoreError(self._path, "unavailable", str(exc)) from exc

    @property
    def top_stream_seq(self) -> int | None:
        """The highest stream sequence in the chain (``None``: empty), as of the last append."""
        return self._top

    async def append(self, entry: AuditEntry) -> AuditRecord | None:
        """Append one event at the end of the chain.

        Returns:
            The stored record, or ``None`` when ``entry.stream_seq`` is already stored (a
            redelivery): nothing is changed then.

        Raises:
            StoreError: the store is closed or the write failed (nothing is written).
            UnicodeEncodeError: the payload holds a lone surrogate (nothing is written).
        """
        return (await self.append_batch([entry]))[0]

    async def append_batch(self, entries: Sequence[AuditEntry]) -> list[AuditRecord | None]:
        """Append events at the end of the chain, in the order given, in one transaction.

        Returns:
            For each entry, its stored record, or ``None`` when its ``stream_seq`` is already
            stored (a redelivery) or appears earlier in ``entries``: nothing is stored for it.

        Raises:
            StoreError: the store is closed or the write failed (nothing of the batch is written).
            UnicodeEncodeError: a payload holds a lone surrogate (nothing of the batch is written).
        """
        return await self._run(lambda: self._append(entries))

    async def trail(self, request_id: str) -> list[AuditRecord]:
        """Return every record of one tool request, in bus order (JetStream stream sequence).

        Raises:
            StoreError: the store is closed or the read failed.
        """
        sql = f"SELECT {_COLUMNS} FROM audit_records WHERE request_id = ? ORDER BY stream_seq"
        return await self._run(lambda: [_record(row) for row in self._conn.execute(sql, (request_id,))])

    async def security_records(self, limit: int) -> list[AuditRecord]:
        """Return the ``limit`` most recent security events (``tg.security.*``), newest first.

        Raises:
            StoreError: the store is closed or the read failed.
        """
        sql = (
            f"SELECT {_COLUMNS} FROM audit_records WHERE event_type = 'security.event'"
            " AND subject LIKE 'tg.security.%' ORDER BY sequence DESC LIMIT ?"
        )
        return await self._run(lambda: [_record(row) for row in self._conn.execute(sql, (limit,))])

    async def requests(
        self, principal: str | None, since: str | None, limit: int
    ) -> list[tuple[AuditRecord, list[AuditRecord]]]:
        """The ``limit`` most recent ``tool.requested`` records, newest first, each with its decisions and receipts.

        Args:
            principal: only this principal's requests (``None``: all).
            since: only requests whose ``occurred_at`` sorts at or after this ISO 8601 UTC text.
            limit: at most this many requests.

        Raises:
            StoreError: the store is closed or the read failed.
        """
        return await self._run(lambda: self._requests(principal, since, limit))

    def _requests(
        self, principal: str | None, since: str | None, limit: int
    ) -> list[tuple[AuditRecord, list[AuditRecord]]]:
        sql = (
            f"SELECT {_COLUMNS} FROM audit_records WHERE event_type = 'tool.requested'"
            " AND (?1 IS NULL OR principal = ?1) AND (?2 IS NULL OR occurred_at >= ?2) ORDER BY sequence DESC LIMIT ?3"
        )
        asked = [_record(row) for row in self._conn.execute(sql, (principal, since, limit))]
        keys = [(record.principal, record.request_id) for record in asked]
        found: dict[tuple[str | None, str | None], list[AuditRecord]] = {}
        for record in self._outcomes(keys) if keys else ():
            found.setdefault((record.principal, record.request_id), []).append(record)
        return [(record, found.get((record.principal, record.request_id), [])) for record in asked]

    def _outcomes(self, keys: list[tuple[str | None, str | None]]) -> list[AuditRecord]:
        """The decisions and receipts of each ``(principal, request_id)`` in ``keys``.

        Matched on both: another principal's records under the same request id are not this request's.
        """
        pairs = ", ".join("(?, ?)" for _ in keys)
        sql = (
            f"SELECT {_COLUMNS} FROM audit_records WHERE (principal, request_id) IN (VALUES {pairs})"
            " AND event_type IN ('decision.made', 'receipt.issued')"
        )
        return [_record(row) for row in self._conn.execute(sql, [part for key in keys for part in key])]

    async def verify(self, signatures: SignatureCheck | None = None) -> VerifyResult:
        """Verify the whole chain, streaming records in sequence order; ``signatures`` (if any) sees each record.

        Returns:
            The :class:`~toolgate.audit.domain.VerifyResult`; a broken chain is a value.

        Raises:
            StoreError: the store is closed or the read failed.
        """
        records = self._records
        return await self._run(lambda: verify_chain(signatures.watch(records()) if signatures else records()))

    async def page(self, after: int, limit: int) -> list[AuditRecord]:
        """Up to ``limit`` records with a chain sequence above ``after``, in chain order.

        Raises:
            StoreError: the store is closed or the read failed.
        """
        sql = f"SELECT {_COLUMNS} FROM audit_records WHERE sequence > ? ORDER BY sequence LIMIT ?"
        return await self._run(lambda: [_record(row) for row in self._conn.execute(sql, (after, limit))])

    async def coverage(self, limit: int = 20) -> tuple[list[int], int | None]:
        """Which stream sequences between the first and last audited one are missing.

        Every message of the stream is audited, so a hole means an event that never
        reached the chain (the chain's own links cannot show that).

        Returns:
            ``(missing, last)``: up to ``limit`` missing stream sequences, ascending, and the
            highest audited stream sequence (``None`` when the store is empty).

        Raises:
            StoreError: the store is closed or the read failed.
        """
        return await self._run(lambda: self._coverage(limit))

    async def out_of_order(self, limit: int = 20) -> list[int]:
        """Chain positions whose stream sequence is below the previous record's (first ``limit``).

        The audit consumer appends in stream order, so the chain repeats the bus's order;
        a position listed here holds an event appended after one that came later on the bus.

        Raises:
            StoreError: the store is closed or the read failed.
        """
        sql = (
            "SELECT sequence FROM (SELECT sequence, stream_seq, LAG(stream_seq) OVER (ORDER BY sequence)"
            " AS prev FROM audit_records) WHERE stream_seq < prev ORDER BY sequence LIMIT ?"
        )
        return await self._run(lambda: [int(row[0]) for row in self._conn.execute(sql, (limit,))])

    def _coverage(self, limit: int) -> tuple[list[int], int | None]:
        sql = (
            "SELECT prev + 1, stream_seq - 1 FROM (SELECT stream_seq, LAG(stream_seq) OVER (ORDER BY stream_seq)"
            " AS prev FROM audit_records) WHERE stream_seq - prev > 1 ORDER BY stream_seq"
        )
        missing: list[int] = []
        for first, last in self._conn.execute(sql):
            missing.extend(range(first, min(last, first + limit) + 1))
            if len(missing) >= limit:
                break
        top = self._conn.execute("SELECT MAX(stream_seq) FROM audit_records").fetchone()[0]
        return missing[:limit], top

    async def count(self) -> int:
        """Return the number of records stored.

        Raises:
            StoreError: the store is closed or the read failed.
        """
        return await self._run(lambda: int(self._conn.execute("SELECT COUNT(*) FROM audit_records").fetchone()[0]))

    async def close(self) -> None:
        """Close the connection; later calls raise :class:`StoreError`. Idempotent."""
        await asyncio.to_thread(self._close)

    async def _run(self, work: Callable[[], _T]) -> _T:
        """Run ``work`` in a thread, holding the lock, with sqlite errors as StoreError."""
        return await asyncio.to_thread(self._locked, work)

    def _locked(self, work: Callable[[], _T]) -> _T:
        with self._lock:
            if self._closed:
                raise StoreError(self._path, "closed", "the audit store is closed")
            try:
                return work()
            except sqlite3.Error as exc:
                raise StoreError(self._path, "unavailable", str(exc)) from exc

    def _append(self, entries: Sequence[AuditEntry]) -> list[AuditRecord | None]:
        """Read the last record and insert the successors in one immediate transaction."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            records = self._append_in_tx(entries)
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        self._top = max([self._top or 0, *(record.stream_seq for record in records if record is not None)]) or None
        return records

    def _append_in_tx(self, entries: Sequence[AuditEntry]) -> list[AuditRecord | None]:
        seen = self._stored_stream_seqs([entry.stream_seq for entry in entries])
        row = self._conn.execute(f"SELECT {_COLUMNS} FROM audit_records ORDER BY sequence DESC LIMIT 1").fetchone()
        last = None if row is None else _record(row)
        records: list[AuditRecord | None] = []
        for entry in entries:
            fresh = entry.stream_seq not in seen
            seen.add(entry.stream_seq)
            last = next_record(last, entry) if fresh else last
            records.append(last if fresh else None)
        new = [tuple(getattr(record, name) for name in _NAMES) for record in records if record is not None]
        self._conn.executemany(f"INSERT INTO audit_records ({_COLUMNS}) VALUES ({_MARKS})", new)
        return records

    def _stored_stream_seqs(self, stream_seqs: list[int]) -> set[int]:
        """Which of ``stream_seqs`` are already in the chain (one query for the batch)."""
        sql = f"SELECT stream_seq FROM audit_records WHERE stream_seq IN ({', '.join('?' * len(stream_seqs))})"
        return {int(row[0]) for row in self._conn.execute(sql, stream_seqs)}

    def _records(self) -> Iterator[AuditRecord]:
        """Yield every record in sequence order, fetching ``_FETCH_ROWS`` at a time."""
        cursor = self._conn.execute(f"SELECT {_COLUMNS} FROM audit_records ORDER BY sequence")
        while rows := cursor.fetchmany(_FETCH_ROWS):
            yield from (_record(row) for row in rows)

    def _close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
