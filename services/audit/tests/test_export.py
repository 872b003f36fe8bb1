"""``tg.audit.export`` pages the chain in order and refuses a page it cannot answer, saying why."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from effectgate.audit.adapters.sqlite import SqliteAuditStore
from effectgate.audit.intake import entry_of
from effectgate.audit.service import EXPORT_PAGE_BYTES, Audit
from effectgate.contracts.rpc.audit import EXPORT_PAGE, ExportQuery


async def _no_seq() -> int | None:
    return None


@pytest.fixture
async def audit(tmp_path: Path) -> AsyncIterator[Audit]:
    store = SqliteAuditStore(tmp_path / "audit.sqlite3")
    for seq in range(1, 8):
        await store.append(entry_of("tg.req.p", b'{"type": "tool.requested"}', f"m{seq}", seq, "t"))
    yield Audit(store, _no_seq)
    await store.close()


async def test_pages_cover_the_chain_once_in_order(audit: Audit) -> None:
    seen: list[int] = []
    after = 0
    while (page := await audit.export(ExportQuery(after=after, limit=3))).records:
        seen += [record.sequence for record in page.records]
        after = page.records[-1].sequence
    assert seen == list(range(1, 8))


@pytest.mark.parametrize(("after", "limit"), [(0, 0), (0, -1), (0, EXPORT_PAGE + 1), (-1, 10), (0, 10**12)])
async def test_a_page_out_of_bounds_is_refused_naming_them(audit: Audit, after: int, limit: int) -> None:
    reply = await audit.export(ExportQuery(after=after, limit=limit))
    assert (reply.ok, reply.records) == (False, []) and f"1..{EXPORT_PAGE}" in reply.reason


@pytest.mark.parametrize(
    "body", [b"", b"not json", b"[]", b'{"after": "1"}', b'{"after": 0, "limit": 10, "as": "admin"}', b"{" * 5000]
)
def test_a_body_that_is_not_a_query_is_refused_by_the_decoder(body: bytes) -> None:
    from effectgate.contracts.events import decode_untrusted

    with pytest.raises(msgspec.DecodeError):
        decode_untrusted(msgspec.json.Decoder(ExportQuery), body)


async def test_a_page_of_large_records_is_cut_to_what_the_bus_carries_and_the_rest_follows(tmp_path: Path) -> None:
    store = SqliteAuditStore(tmp_path / "big.sqlite3")
    big = b'{"type": "tool.requested", "arguments": {"content": "' + b"x" * 60_000 + b'"}}'
    for seq in range(1, 41):  # 40 records of ~60 KB: 2.4 MB, over what one NATS message carries
        await store.append(entry_of("tg.req.p", big, f"b{seq}", seq, "t"))
    audit, seen, after, sizes = Audit(store, _no_seq), [], 0, []
    try:
        while (page := await audit.export(ExportQuery(after=after, limit=EXPORT_PAGE))).records:
            sizes.append(len(msgspec.json.encode(page)))
            seen += [record.sequence for record in page.records]
            after = page.records[-1].sequence
    finally:
        await store.close()
    assert seen == list(range(1, 41)) and len(sizes) > 1
    assert max(sizes) <= EXPORT_PAGE_BYTES + 70_000  # the budget, overrun by at most the one record that crossed it
