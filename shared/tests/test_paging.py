"""The page filler: a page takes what fits, an item too large alone is summarised, nothing is dropped."""

from __future__ import annotations

import msgspec
import pytest

from effectgate.contracts.bus.paging import PageQuery, page_query_of
from effectgate.shared.consumer.paging import PageFiller, PageOverflow, items_budget


def _page(filler: PageFiller) -> bytes:
    return msgspec.json.encode(filler.items)


@pytest.mark.parametrize("sizes", [[10] * 50, [1, 300, 2, 40, 999, 3], [1000, 1000], [5]])
@pytest.mark.parametrize("budget", [1000, 1003, 5000])
def test_a_page_never_exceeds_its_budget_and_pages_lose_nothing(sizes: list[int], budget: int) -> None:
    items = [msgspec.json.encode("x" * (size - 2)) for size in sizes]
    listed, start = [], 0
    while start < len(items):
        filler = PageFiller(budget - 2, limit=100)  # the two brackets of the list
        for index in range(start, len(items)):
            if not filler.offer(str(index), items[index], lambda: [b'"s"']):
                break
        assert len(_page(filler)) <= budget
        taken = [bytes(raw) for raw in filler.items]
        listed += taken
        start += len(taken)
    assert len(listed) == len(items)
    assert all(got == want or got == b'"s"' for got, want in zip(listed, items, strict=True))


def test_the_first_item_too_large_alone_is_taken_summarised_and_a_later_one_opens_the_next_page() -> None:
    filler = PageFiller(100, limit=10)
    assert filler.offer("a", b"x" * 500, lambda: [b"y" * 200, b"z" * 50])
    assert [bytes(i) for i in filler.items] == [b"z" * 50] and filler.last_key == "a"
    assert not filler.offer("b", b"x" * 60)  # it would fit an empty page: it opens the next one
    assert filler.last_key == "a"


def test_the_limit_ends_a_page_and_an_item_no_summary_fits_is_an_overflow() -> None:
    filler = PageFiller(10_000, limit=2)
    assert filler.offer("a", b"1") and filler.offer("b", b"2") and not filler.offer("c", b"3")
    with pytest.raises(PageOverflow):
        PageFiller(10, limit=5).offer("a", b"x" * 11, lambda: [b"y" * 11])


def test_the_budget_is_the_payload_less_headroom_and_envelope() -> None:
    assert items_budget(65_536, b"x" * 300) == 65_536 - 1024 - 300


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"", PageQuery()),
        (b"  ", PageQuery()),
        (b"{}", PageQuery()),
        (b'{"after": "c", "limit": 5, "summary": true}', PageQuery(after="c", limit=5, summary=True)),
        (b'{"limit": 0}', "malformed"),
        (b'{"limit": 1001}', "malformed"),
        (b'{"after": "' + b"c" * 201 + b'"}', "malformed"),
        (b'{"cursor": "c"}', "malformed"),
        (b"[" * 5000, "oversized"),
        (b"[" * 1000, "malformed"),
    ],
)
def test_a_page_query_is_read_or_refused_naming_why(body: bytes, expected: object) -> None:
    found = page_query_of(body)
    assert (found[0] if isinstance(found, tuple) else found) == expected
