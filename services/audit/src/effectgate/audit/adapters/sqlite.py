"""SQLite store for the audit hash chain.

One ``sqlite3`` connection in WAL mode, guarded by a lock; every blocking call runs in a worker
thread through :func:`asyncio.to_thread`.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from effectgate.audit.adapters.sqlite_sql import (
    COLUMNS,
    SCHEMA,
    all_records,
    append_in_tx,
    as_record,
    coverage,
    fence_in_tx,
    requests,
)
from effectgate.audit.domain import AuditEntry, AuditRecord, VerifyResult, verify_chain
from effectgate.audit.errors import StoreError
from effectgate.audit.ports import Writer
from effectgate.audit.signatures import SignatureCheck

__all__ = ["SqliteAuditStore"]

_T = TypeVar("_T")


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
            self._conn.executescript(SCHEMA)
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

    async def append_batch(
        self, entries: Sequence[AuditEntry], writer: Writer | None = None
    ) -> list[AuditRecord | None]:
        """Append events at the end of the chain, in the order given, in one transaction.

        Args:
            entries: the events, in stream order.
            writer: ``(token, holder)`` of the lease the writer holds: checked and recorded in
                the same transaction (``fence_in_tx``). ``None``: a writer without a lease (one replica).

        Returns:
            For each entry, its stored record, or ``None`` when its ``stream_seq`` is already
            stored (a redelivery) or appears earlier in ``entries``: nothing is stored for it.

        Raises:
            Fenced: a writer with a higher token wrote since (nothing of the batch is written).
            StoreError: the store is closed or the write failed (nothing of the batch is written).
            UnicodeEncodeError: a payload holds a lone surrogate (nothing of the batch is written).
        """
        return await self._run(lambda: self._append(entries, writer))

    async def take_over(self, writer: Writer) -> None:
        """Record ``writer``'s token now, so that no writer with a lower one appends any more.

        Raises:
            Fenced: a writer with a higher token is already recorded.
            StoreError: the store is closed or the write failed.
        """
        await self._run(lambda: self._append([], writer))

    async def last_stream_seq(self) -> int | None:
        """The highest stream sequence in the chain as stored now (another process may have appended).

        Raises:
            StoreError: the store is closed or the read failed.
        """
        sql = "SELECT MAX(stream_seq) FROM audit_records"
        return await self._run(lambda: self._conn.execute(sql).fetchone()[0])

    async def first_stream_seq(self) -> int | None:
        """The lowest stream sequence in the chain (``None``: empty).

        Raises:
            StoreError: the store is closed or the read failed.
        """
        sql = "SELECT MIN(stream_seq) FROM audit_records"
        return await self._run(lambda: self._conn.execute(sql).fetchone()[0])

    async def trail(self, request_id: str) -> list[AuditRecord]:
        """Return every record of one tool request, in bus order (JetStream stream sequence).

        Raises:
            StoreError: the store is closed or the read failed.
        """
        sql = f"SELECT {COLUMNS} FROM audit_records WHERE request_id = ? ORDER BY stream_seq"
        return await self._run(lambda: [as_record(row) for row in self._conn.execute(sql, (request_id,))])

    async def security_records(self, limit: int) -> list[AuditRecord]:
        """Return the ``limit`` most recent security events (``tg.security.*``), newest first.

        Raises:
            StoreError: the store is closed or the read failed.
        """
        sql = (
            f"SELECT {COLUMNS} FROM audit_records WHERE event_type = 'security.event'"
            " AND subject LIKE 'tg.security.%' ORDER BY sequence DESC LIMIT ?"
        )
        return await self._run(lambda: [as_record(row) for row in self._conn.execute(sql, (limit,))])

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
        return await self._run(lambda: requests(self._conn, principal, since, limit))

    async def verify(self, signatures: SignatureCheck | None = None) -> VerifyResult:
        """Verify the whole chain, streaming records in sequence order; ``signatures`` (if any) sees each record.

        Returns:
            The :class:`~effectgate.audit.domain.VerifyResult`; a broken chain is a value.

        Raises:
            StoreError: the store is closed or the read failed.
        """
        records = functools.partial(all_records, self._conn)
        return await self._run(lambda: verify_chain(signatures.watch(records()) if signatures else records()))

    async def page(self, after: int, limit: int) -> list[AuditRecord]:
        """Up to ``limit`` records with a chain sequence above ``after``, in chain order.

        Raises:
            StoreError: the store is closed or the read failed.
        """
        sql = f"SELECT {COLUMNS} FROM audit_records WHERE sequence > ? ORDER BY sequence LIMIT ?"
        return await self._run(lambda: [as_record(row) for row in self._conn.execute(sql, (after, limit))])

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
        return await self._run(lambda: coverage(self._conn, limit))

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

    def _append(self, entries: Sequence[AuditEntry], writer: Writer | None) -> list[AuditRecord | None]:
        """Check the writer, read the last record and insert the successors in one immediate transaction."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            if writer is not None:
                fence_in_tx(self._conn, *writer)
            records = append_in_tx(self._conn, entries) if entries else []
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        self._top = max([self._top or 0, *(record.stream_seq for record in records if record is not None)]) or None
        return records

    def _close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
