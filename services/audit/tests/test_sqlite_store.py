"""The SQLite audit store against a real database file."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from effectgate.audit.adapters.sqlite import SqliteAuditStore
from effectgate.audit.domain import GENESIS, AuditEntry, ChainFault
from effectgate.audit.errors import StoreError


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteAuditStore]:
    s = SqliteAuditStore(tmp_path / "audit.db")
    yield s
    await s.close()


async def _append(store: SqliteAuditStore, stream_seq: int, request_id: str | None = "req-a") -> object:
    return await store.append(
        _entry(
            stream_seq,
            f"tg.req.agent{stream_seq}",
            "tool.requested",
            request_id,
            "agent-a",
            "2026-01-01T00:00:00Z",
            f'{{"n":{stream_seq}}}',
        )
    )


def _entry(*values: object) -> AuditEntry:
    names = ("stream_seq", "subject", "event_type", "request_id", "principal", "occurred_at", "payload")
    return AuditEntry(**dict(zip(names, values, strict=True)))  # type: ignore[arg-type]


async def _fill(store: SqliteAuditStore, n: int) -> None:
    for i in range(1, n + 1):
        await _append(store, 100 + i, request_id=f"req-{i % 2}")


def _raw(tmp_path: Path, sql: str, *args: object) -> None:
    conn = sqlite3.connect(tmp_path / "audit.db")
    with conn:
        conn.execute(sql, args)
    conn.close()


async def test_append_returns_the_chained_record(store: SqliteAuditStore) -> None:
    first = await store.append(_entry(7, "tg.req.a", "tool.requested", "r1", "a", "2026-01-01T00:00:00Z", '{"x":1}'))
    second = await store.append(_entry(8, "tg.decision.a", "decision.made", "r1", None, "2026-01-01T00:00:01Z", "{}"))
    assert first is not None and second is not None
    assert (first.sequence, first.stream_seq, first.prev_hash) == (1, 7, GENESIS)
    assert first.payload == '{"x":1}'
    assert (second.sequence, second.prev_hash, second.principal) == (2, first.hash, None)
    assert await store.count() == 2


async def test_duplicate_stream_seq_is_ignored(store: SqliteAuditStore) -> None:
    stored = await _append(store, 5)
    again = await store.append(_entry(5, "tg.other", "other", "req-b", "b", "2027-01-01T00:00:00Z", "{}"))
    assert again is None
    assert await store.count() == 1
    assert await store.trail("req-a") == [stored]
    assert await store.trail("req-b") == []


async def test_trail_filters_by_request_in_chain_order(store: SqliteAuditStore) -> None:
    await _fill(store, 6)
    await _append(store, 999, request_id=None)
    trail = await store.trail("req-1")
    assert [r.sequence for r in trail] == [1, 3, 5]
    assert {r.request_id for r in trail} == {"req-1"}
    assert [r.sequence for r in await store.trail("req-0")] == [2, 4, 6]
    assert await store.trail("unknown") == []


async def test_verify_ok(store: SqliteAuditStore) -> None:
    await _fill(store, 5)
    result = await store.verify()
    assert result.ok and result.checked == 5 and result.first_broken is None


async def test_verify_names_a_record_whose_payload_was_edited(store: SqliteAuditStore, tmp_path: Path) -> None:
    await _fill(store, 5)
    _raw(tmp_path, "UPDATE audit_records SET payload = ? WHERE sequence = ?", '{"n":0}', 4)
    result = await store.verify()
    assert not result.ok
    assert result.first_broken == 4
    assert result.reason_code is ChainFault.HASH_MISMATCH


async def test_verify_names_the_record_after_a_deleted_one(store: SqliteAuditStore, tmp_path: Path) -> None:
    await _fill(store, 5)
    _raw(tmp_path, "DELETE FROM audit_records WHERE sequence = ?", 2)
    result = await store.verify()
    assert not result.ok
    assert result.first_broken == 3
    assert result.reason_code is ChainFault.SEQUENCE_GAP


async def test_concurrent_appends_make_one_unbroken_chain(store: SqliteAuditStore) -> None:
    results = await asyncio.gather(*(_append(store, 1000 + i, request_id="req-c") for i in range(50)))
    assert all(r is not None for r in results)
    assert await store.count() == 50
    trail = await store.trail("req-c")
    assert sorted(r.sequence for r in trail) == list(range(1, 51))
    assert [r.stream_seq for r in trail] == sorted(r.stream_seq for r in trail)
    assert sorted(r.stream_seq for r in trail) == list(range(1000, 1050))
    result = await store.verify()
    assert result.ok and result.checked == 50


async def test_concurrent_redeliveries_store_once(store: SqliteAuditStore) -> None:
    results = await asyncio.gather(*(_append(store, 42) for _ in range(10)))
    assert sum(r is not None for r in results) == 1
    assert await store.count() == 1


async def test_chain_continues_after_reopen(tmp_path: Path) -> None:
    first = SqliteAuditStore(tmp_path / "audit.db")
    await _fill(first, 3)
    await first.close()
    second = SqliteAuditStore(tmp_path / "audit.db")
    record = await _append(second, 500)
    result = await second.verify()
    await second.close()
    assert getattr(record, "sequence", None) == 4
    assert result.ok and result.checked == 4


async def test_closed_store_raises(tmp_path: Path) -> None:
    s = SqliteAuditStore(tmp_path / "audit.db")
    await s.close()
    await s.close()
    with pytest.raises(StoreError) as info:
        await s.count()
    assert info.value.reason_code == "closed"


def test_unopenable_path_raises(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as info:
        SqliteAuditStore(tmp_path / "missing-dir" / "audit.db")
    assert info.value.reason_code == "unavailable"


async def test_coverage_names_stream_sequences_that_never_reached_the_chain(store: SqliteAuditStore) -> None:
    assert await store.coverage() == ([], None)
    for seq in (3, 4, 5, 8, 12):
        await _append(store, seq)
    missing, last = await store.coverage()
    assert (missing, last) == ([6, 7, 9, 10, 11], 12)
    assert (await store.coverage(limit=2))[0] == [6, 7]


async def test_a_chain_appended_out_of_stream_order_is_named(store: SqliteAuditStore) -> None:
    for stream_seq in (10, 12, 11, 13, 9):
        await _append(store, stream_seq)
    assert await store.out_of_order() == [3, 5]
    assert (await store.verify()).ok, "the links themselves are intact"


async def test_a_chain_in_stream_order_has_nothing_out_of_order(store: SqliteAuditStore) -> None:
    for stream_seq in (10, 12, 13):
        await _append(store, stream_seq)
    assert await store.out_of_order() == []
