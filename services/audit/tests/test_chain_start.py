"""``verify`` names the stream messages missing before the chain's first record."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from effectgate.audit import gaps
from effectgate.audit.adapters.sqlite import SqliteAuditStore
from effectgate.audit.gaps import in_stream_order
from effectgate.audit.service import Audit
from effectgate.contracts.rpc.audit import StreamRange
from effectgate.shared.consumer.consumers import Delivery

from .conftest import entry

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _at(seq: int | None) -> Callable[[], Awaitable[int | None]]:
    async def read() -> int | None:
        return seq

    return read


async def _verified(tmp_path: Path, chain: list[int], stream_first: int | None, stream_last: int | None) -> Audit:
    store = SqliteAuditStore(tmp_path / "audit.db")
    await store.append_batch([entry(seq) for seq in chain])
    return Audit(store, _at(stream_last), stream_first_seq=_at(stream_first))


async def test_a_chain_that_begins_after_the_stream_s_first_message_is_not_intact_and_names_what_is_missing(
    tmp_path: Path,
) -> None:
    audit = await _verified(tmp_path, [3, 4, 5], stream_first=1, stream_last=5)
    reply = await audit.verify()
    await audit.store.close()
    assert reply.result.ok and not reply.missing_stream_seqs, "the chain's own links are fine"
    assert not reply.ok and reply.missing_at_start == StreamRange(first=1, last=2)


async def test_a_chain_from_the_stream_s_first_kept_message_misses_nothing_at_its_start(tmp_path: Path) -> None:
    audit = await _verified(tmp_path, [7, 8], stream_first=7, stream_last=8)
    reply = await audit.verify()
    await audit.store.close()
    assert reply.ok and reply.missing_at_start is None


async def test_an_older_chain_than_the_stream_keeps_misses_nothing_and_an_empty_one_is_only_behind(
    tmp_path: Path,
) -> None:
    older = await _verified(tmp_path, [2, 3], stream_first=3, stream_last=3)
    assert (await older.verify()).missing_at_start is None
    await older.store.close()
    empty = Audit(SqliteAuditStore(tmp_path / "empty.db"), _at(9), stream_first_seq=_at(1))
    reply = await empty.verify()
    await empty.store.close()
    assert reply.missing_at_start is None and reply.audited_last_seq is None and reply.stream_last_seq == 9


async def test_an_empty_chain_is_filled_from_the_stream_s_first_message_before_a_later_batch() -> None:
    stored = {seq: _delivery(seq) for seq in (1, 2, 3, 4, 5)}

    async def read_next(seq: int) -> Delivery | None:
        return next((stored[at] for at in sorted(stored) if at >= seq), None)

    ordered = await in_stream_order([_delivery(4), _delivery(5)], None, read_next)
    assert [delivery.stream_seq for delivery in ordered] == [1, 2, 3, 4, 5]


def _delivery(seq: int) -> Delivery:
    return Delivery(subject="tg.req.a", data=b"{}", headers={}, stream_seq=seq, num_delivered=1, stored_at=NOW)


async def test_a_gap_longer_than_one_round_returns_no_delivery_past_where_the_filling_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stored = {seq: _delivery(seq) for seq in range(1, 11)}

    async def read_next(seq: int) -> Delivery | None:
        return next((stored[at] for at in sorted(stored) if at >= seq), None)

    monkeypatch.setattr(gaps, "MAX_FILLED", 3)
    first = await in_stream_order([_delivery(9), _delivery(10)], None, read_next)
    assert [delivery.stream_seq for delivery in first] == [1, 2, 3], "a delivery past the gap would leave it behind"
    rest = await in_stream_order([_delivery(9), _delivery(10)], 6, read_next)
    assert [delivery.stream_seq for delivery in rest] == [7, 8, 9, 10]
