"""The audit chain's SQLite table and the statements that need more than one query.

Each function runs synchronously on the ``sqlite3`` connection it is given; the caller
(:class:`~effectgate.audit.adapters.sqlite.SqliteAuditStore`) holds its lock and runs it
in a worker thread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from effectgate.audit.domain import AuditEntry, AuditRecord, next_record
from effectgate.audit.errors import Fenced

__all__ = ["COLUMNS", "SCHEMA", "all_records", "append_in_tx", "as_record", "coverage", "fence_in_tx", "requests"]

_NAMES = AuditRecord.__struct_fields__
COLUMNS = ", ".join(_NAMES)
_MARKS = ", ".join("?" * len(_NAMES))

SCHEMA = """
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
CREATE TABLE IF NOT EXISTS audit_writers (
    token          INTEGER PRIMARY KEY,
    holder         TEXT NOT NULL,
    from_sequence  INTEGER NOT NULL
);
"""

_FETCH_ROWS = 500


def as_record(row: tuple[Any, ...]) -> AuditRecord:
    """Build a record from a row selected as ``COLUMNS``."""
    return AuditRecord(**dict(zip(_NAMES, row, strict=True)))


def requests(
    conn: sqlite3.Connection, principal: str | None, since: str | None, limit: int
) -> list[tuple[AuditRecord, list[AuditRecord]]]:
    """The ``limit`` most recent ``tool.requested`` records on ``conn``, newest first, each with its outcomes."""
    sql = (
        f"SELECT {COLUMNS} FROM audit_records WHERE event_type = 'tool.requested'"
        " AND (?1 IS NULL OR principal = ?1) AND (?2 IS NULL OR occurred_at >= ?2) ORDER BY sequence DESC LIMIT ?3"
    )
    asked = [as_record(row) for row in conn.execute(sql, (principal, since, limit))]
    keys = [(record.principal, record.request_id) for record in asked]
    found: dict[tuple[str | None, str | None], list[AuditRecord]] = {}
    for record in _outcomes(conn, keys) if keys else ():
        found.setdefault((record.principal, record.request_id), []).append(record)
    return [(record, found.get((record.principal, record.request_id), [])) for record in asked]


def _outcomes(conn: sqlite3.Connection, keys: list[tuple[str | None, str | None]]) -> list[AuditRecord]:
    """The decisions and receipts of each ``(principal, request_id)`` in ``keys``.

    Matched on both: another principal's records under the same request id are not this request's.
    """
    pairs = ", ".join("(?, ?)" for _ in keys)
    sql = (
        f"SELECT {COLUMNS} FROM audit_records WHERE (principal, request_id) IN (VALUES {pairs})"
        " AND event_type IN ('decision.made', 'receipt.issued')"
    )
    return [as_record(row) for row in conn.execute(sql, [part for key in keys for part in key])]


def coverage(conn: sqlite3.Connection, limit: int) -> tuple[list[int], int | None]:
    """Up to ``limit`` stream sequences missing between the first and last audited one, and the last."""
    sql = (
        "SELECT prev + 1, stream_seq - 1 FROM (SELECT stream_seq, LAG(stream_seq) OVER (ORDER BY stream_seq)"
        " AS prev FROM audit_records) WHERE stream_seq - prev > 1 ORDER BY stream_seq"
    )
    missing: list[int] = []
    for first, last in conn.execute(sql):
        missing.extend(range(first, min(last, first + limit) + 1))
        if len(missing) >= limit:
            break
    top = conn.execute("SELECT MAX(stream_seq) FROM audit_records").fetchone()[0]
    return missing[:limit], top


def append_in_tx(conn: sqlite3.Connection, entries: Sequence[AuditEntry]) -> list[AuditRecord | None]:
    """Insert the successors of the last record, in a transaction the caller holds; ``None`` for a redelivery."""
    seen = _stored_stream_seqs(conn, [entry.stream_seq for entry in entries])
    row = conn.execute(f"SELECT {COLUMNS} FROM audit_records ORDER BY sequence DESC LIMIT 1").fetchone()
    last = None if row is None else as_record(row)
    records: list[AuditRecord | None] = []
    for entry in entries:
        fresh = entry.stream_seq not in seen
        seen.add(entry.stream_seq)
        last = next_record(last, entry) if fresh else last
        records.append(last if fresh else None)
    new = [tuple(getattr(record, name) for name in _NAMES) for record in records if record is not None]
    conn.executemany(f"INSERT INTO audit_records ({COLUMNS}) VALUES ({_MARKS})", new)
    return records


def _stored_stream_seqs(conn: sqlite3.Connection, stream_seqs: list[int]) -> set[int]:
    """Which of ``stream_seqs`` are already in the chain (one query for the batch)."""
    sql = f"SELECT stream_seq FROM audit_records WHERE stream_seq IN ({', '.join('?' * len(stream_seqs))})"
    return {int(row[0]) for row in conn.execute(sql, stream_seqs)}


def all_records(conn: sqlite3.Connection) -> Iterator[AuditRecord]:
    """Yield every record in sequence order, fetching ``_FETCH_ROWS`` at a time."""
    cursor = conn.execute(f"SELECT {COLUMNS} FROM audit_records ORDER BY sequence")
    while rows := cursor.fetchmany(_FETCH_ROWS):
        yield from (as_record(row) for row in rows)


def fence_in_tx(conn: sqlite3.Connection, token: int, holder: str) -> None:
    """Refuse a writer below the chain's highest token; record a higher one, from the next chain position.

    Runs in the caller's transaction, before any append: a refused batch stores nothing.

    Raises:
        Fenced: ``token`` is below the highest token recorded (another writer took over).
    """
    floor = conn.execute("SELECT MAX(token) FROM audit_writers").fetchone()[0]
    if floor is not None and token < floor:
        raise Fenced(token, int(floor))
    if floor is None or token > floor:
        top = conn.execute("SELECT MAX(sequence) FROM audit_records").fetchone()[0]
        sql = "INSERT INTO audit_writers (token, holder, from_sequence) VALUES (?, ?, ?)"
        conn.execute(sql, (token, holder, (top or 0) + 1))
