"""A writer whose lease was taken over appends nothing to the chain (the fencing token)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from effectgate.audit.adapters.sqlite import SqliteAuditStore
from effectgate.audit.errors import Fenced

from .conftest import entry


async def test_an_older_writer_is_refused_once_a_newer_one_took_over_and_nothing_of_its_batch_is_stored(
    tmp_path: Path,
) -> None:
    old, new = SqliteAuditStore(tmp_path / "a.db"), SqliteAuditStore(tmp_path / "a.db")  # two replicas, one file
    try:
        await old.append_batch([entry(1), entry(2)], (5, "old"))
        await new.take_over((9, "new"))
        with pytest.raises(Fenced) as refused:
            await old.append_batch([entry(3), entry(4)], (5, "old"))
        assert (refused.value.token, refused.value.floor) == (5, 9)
        assert [r for r in await new.append_batch([entry(3)], (9, "new")) if r] != []
        assert await new.last_stream_seq() == 3 and await old.count() == 3
    finally:
        await old.close()
        await new.close()
    with sqlite3.connect(tmp_path / "a.db") as db:
        assert db.execute("SELECT token, holder, from_sequence FROM audit_writers ORDER BY token").fetchall() == [
            (5, "old", 1),
            (9, "new", 3),
        ]
