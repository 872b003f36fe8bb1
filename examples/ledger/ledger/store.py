"""The target system the example's tools act on: a ledger of orders, refunds and journal entries in SQLite.

One file (``LEDGER_DB``); every write is one transaction, so a refund either is in the file or is not —
which is what the reconcile step reads after an ``uncertain`` call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Entry", "Ledger", "LedgerError", "OrderRow", "RefundRow"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, customer TEXT NOT NULL, total REAL NOT NULL);
CREATE TABLE IF NOT EXISTS refunds (refund_id TEXT PRIMARY KEY, order_id TEXT NOT NULL, amount REAL NOT NULL,
  call_key TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS journal (account TEXT NOT NULL, memo TEXT NOT NULL, started REAL NOT NULL,
  ended REAL NOT NULL, call_key TEXT NOT NULL);
"""


class LedgerError(Exception):
    """The ledger could not be read or written (its file is missing, locked or corrupt)."""


@dataclass(frozen=True)
class OrderRow:
    """An order and how much of it was refunded."""

    order_id: str
    customer: str
    total: float
    refunded: float


@dataclass(frozen=True)
class RefundRow:
    """One refund, by its id."""

    refund_id: str
    order_id: str
    amount: float


@dataclass(frozen=True)
class Entry:
    """One journal posting, when it started and ended (epoch seconds), and the call that made it."""

    account: str
    memo: str
    started: float
    ended: float
    call_key: str


class Ledger:
    """The ledger in the SQLite file ``path`` (default ``$LEDGER_DB``, else ``ledger.sqlite3`` here)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path or os.environ.get("LEDGER_DB", "ledger.sqlite3"))

    @contextlib.contextmanager
    def _connect(self, busy_timeout_s: float = 5.0) -> Iterator[sqlite3.Connection]:
        """A connection for one operation, closed after it; a lock held over ``busy_timeout_s`` is a LedgerError."""
        try:
            with contextlib.closing(sqlite3.connect(self.path, timeout=busy_timeout_s)) as connection, connection:
                connection.executescript(SCHEMA)
                yield connection
        except sqlite3.Error as error:
            raise LedgerError(f"{self.path}: {error}") from error

    async def add_order(self, order_id: str, customer: str, total: float) -> None:
        """Put an order in the ledger (the example's seed data)."""
        await asyncio.to_thread(
            self._write, "INSERT OR REPLACE INTO orders VALUES (?, ?, ?)", (order_id, customer, total)
        )

    async def order(self, order_id: str, busy_timeout_s: float = 5.0) -> OrderRow | None:
        """The order and what was refunded of it so far; ``None`` when the ledger has no such order."""
        return await asyncio.to_thread(self._order, order_id, busy_timeout_s)

    def _order(self, order_id: str, busy_timeout_s: float) -> OrderRow | None:
        with self._connect(busy_timeout_s) as db:
            row = db.execute("SELECT order_id, customer, total FROM orders WHERE order_id = ?", (order_id,)).fetchone()
            refunded = db.execute("SELECT COALESCE(SUM(amount), 0) FROM refunds WHERE order_id = ?", (order_id,))
            total = float(refunded.fetchone()[0])
            return None if row is None else OrderRow(order_id=row[0], customer=row[1], total=row[2], refunded=total)

    async def orders(self) -> list[OrderRow]:
        """Every order, by id."""
        return await asyncio.to_thread(self._orders)

    def _orders(self) -> list[OrderRow]:
        with self._connect() as db:
            ids = [row[0] for row in db.execute("SELECT order_id FROM orders ORDER BY order_id").fetchall()]
        return [found for order_id in ids if (found := self._order(order_id, 5.0)) is not None]

    async def refund(self, refund_id: str, order_id: str, amount: float, call_key: str) -> RefundRow:
        """Record a refund, once per ``call_key`` (a second refund under the same key is the first one)."""
        await asyncio.to_thread(
            self._write, "INSERT OR IGNORE INTO refunds VALUES (?, ?, ?, ?)", (refund_id, order_id, amount, call_key)
        )
        found = await self.refund_of(call_key)
        assert found is not None  # just written, in one transaction
        return found

    async def refund_of(self, call_key: str) -> RefundRow | None:
        """The refund recorded under ``call_key``, or ``None``."""
        return await asyncio.to_thread(self._refund_of, call_key)

    def _refund_of(self, call_key: str) -> RefundRow | None:
        with self._connect() as db:
            sql = "SELECT refund_id, order_id, amount FROM refunds WHERE call_key = ?"
            row = db.execute(sql, (call_key,)).fetchone()
            return None if row is None else RefundRow(*row)

    async def refunds(self) -> list[RefundRow]:
        """Every refund, in the order they were recorded."""
        return await asyncio.to_thread(self._refunds)

    def _refunds(self) -> list[RefundRow]:
        with self._connect() as db:
            rows = db.execute("SELECT refund_id, order_id, amount FROM refunds ORDER BY rowid").fetchall()
            return [RefundRow(*row) for row in rows]

    async def post(self, account: str, memo: str, hold_s: float, call_key: str) -> Entry:
        """A journal entry on ``account`` by the call ``call_key``, taking ``hold_s`` seconds (start and end recorded).

        Nothing stops a second entry of one ``call_key``: the journal keeps what it is given.
        """
        started = time.time()
        await asyncio.sleep(hold_s)
        entry = Entry(account, memo, started, time.time(), call_key)
        await asyncio.to_thread(
            self._write, "INSERT INTO journal VALUES (?, ?, ?, ?, ?)", (account, memo, started, entry.ended, call_key)
        )
        return entry

    async def entries_of(self, call_key: str) -> list[Entry]:
        """The journal entries made by the call ``call_key``, in the order they were recorded."""
        return await asyncio.to_thread(self._journal, call_key)

    async def journal(self) -> list[Entry]:
        """Every journal entry, in the order they were recorded."""
        return await asyncio.to_thread(self._journal)

    def _journal(self, call_key: str | None = None) -> list[Entry]:
        sql = (
            "SELECT account, memo, started, ended, call_key FROM journal WHERE ? IS NULL OR call_key = ? ORDER BY rowid"
        )
        with self._connect() as db:
            return [Entry(*row) for row in db.execute(sql, (call_key, call_key)).fetchall()]

    def _write(self, sql: str, values: tuple[object, ...]) -> None:
        with self._connect(busy_timeout_s=0.1) as db:
            db.execute(sql, values)
