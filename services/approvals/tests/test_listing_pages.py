"""Pending approvals in pages: every page fits one message, every approval is listed once, none dropped.

In memory and on Redis (``page``), then through the service's request handlers on real
NATS: the brief's case (twenty pending writes of 60 kB arguments at the default 1 MiB
``max_payload``) and generated variants of sizes and limits on a server of 64 KiB.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import msgspec
import nats
import pytest
from faststream.nats import NatsBroker
from nats.aio.client import Client

from effectgate.approvals.handlers import ApprovalsRuntime, build_router
from effectgate.approvals.listing import SUMMARY_ARGUMENT_BYTES, list_page, page, show
from effectgate.approvals.rebuild import Rebuilder
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.bus.paging import PageQuery
from effectgate.contracts.integrity.signing import sign_event
from effectgate.devstack.servers import nats_server
from effectgate.shared.consumer.paging import HEADROOM_BYTES
from effectgate.shared.runtime.assembly import RuntimeCell

SMALL = 65_536


async def _open(kit: Any, count: int, sizes: list[int] | int, *, step_s: float = 0.0) -> list[str]:
    """Open ``count`` approvals with arguments of ``sizes`` bytes (each its own key and content); their ids."""
    opened = []
    for index in range(count):
        size = sizes if isinstance(sizes, int) else sizes[index]
        await kit.approvals.on_decision(_decision(kit, f"r{index}", f"{index:04d}" + "x" * max(0, size - 4)))
        opened.append(kit.approval_id(f"r{index}"))
        kit.clock.now += timedelta(seconds=step_s)
    return opened


def _decision(kit: Any, rid: str, content: str, key: str | None = None) -> Any:
    """The kit's decision, with a request hash of ordinary size (the kit's embeds the content)."""
    decision = kit.decision(rid, key=key or f"k-{rid}", content=content)
    short = msgspec.structs.replace(decision, request_hash=f"sha256:{kit.ns}-{key or rid}", signature="")
    return sign_event(short, kit.policy)


async def _all_pages(kit: Any, max_payload: int, **query: Any) -> list[Any]:
    pages, after = [], None
    for _ in range(100):  # a listing that never ends fails here
        found = await page(kit.store, kit.bus, PageQuery(after=after, **query), max_payload)
        pages.append(found)
        if found.next is None:
            return pages
        after = found.next
    raise AssertionError("the listing did not end within 100 pages")


def _ids(pages: list[Any]) -> list[str]:
    return [json.loads(bytes(item))["approval_id"] for p in pages for item in p.approvals]


@pytest.mark.parametrize(("count", "size", "limit"), [(20, 60_000, 100), (7, 30_000, 2), (30, 100, 4), (3, 10, 100)])
async def test_every_page_fits_and_every_approval_is_listed_once_in_expiry_order(
    kit: Any, count: int, size: int, limit: int
) -> None:
    opened = await _open(kit, count, size, step_s=1.0)
    pages = await _all_pages(kit, SMALL * 4, limit=limit)
    assert _ids(pages) == opened
    assert all(len(msgspec.json.encode(p)) <= SMALL * 4 - HEADROOM_BYTES for p in pages)
    assert all(len(p.approvals) <= limit for p in pages)
    assert all(p.next is not None for p in pages[:-1]) and pages[-1].next is None


async def test_approvals_that_expire_together_are_paged_by_id(kit: Any) -> None:
    opened = await _open(kit, 9, 5_000)  # one clock: one expiry for all
    assert _ids(await _all_pages(kit, 16_384, limit=2)) == sorted(opened)


async def test_an_approval_too_large_for_a_page_alone_is_summarised_never_dropped(kit: Any) -> None:
    opened = await _open(kit, 3, [100, 20_000, 100], step_s=1.0)
    pages = await _all_pages(kit, 8_192)
    assert _ids(pages) == opened
    items = {json.loads(bytes(i))["approval_id"]: json.loads(bytes(i)) for p in pages for i in p.approvals}
    big = items[opened[1]]
    assert (big["omitted"], big["request"]["arguments"]) == (["arguments"], {})
    assert big["arguments_bytes"] > 20_000
    assert items[opened[0]]["omitted"] == [] and items[opened[0]]["request"]["arguments"]["content"].startswith("0000")


async def test_summary_mode_leaves_out_only_large_arguments(kit: Any) -> None:
    opened = await _open(kit, 2, [SUMMARY_ARGUMENT_BYTES // 2, SUMMARY_ARGUMENT_BYTES * 4], step_s=1.0)
    [only] = await _all_pages(kit, SMALL, summary=True)
    small, large = (json.loads(bytes(item)) for item in only.approvals)
    assert (small["approval_id"], small["omitted"]) == (opened[0], [])
    assert (large["approval_id"], large["omitted"], large["request"]["arguments"]) == (opened[1], ["arguments"], {})


async def test_an_approval_answered_between_pages_skips_nothing_else(kit: Any) -> None:
    opened = await _open(kit, 6, 100, step_s=1.0)
    first = await page(kit.store, kit.bus, PageQuery(limit=3), SMALL)
    await kit.answer("alice", "r1", approve=False)  # listed already
    await kit.answer("alice", "r4", approve=False)  # not listed yet
    second = await page(kit.store, kit.bus, PageQuery(after=first.next, limit=3), SMALL)
    assert _ids([first, second]) == [opened[0], opened[1], opened[2], opened[3], opened[5]]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"after": "garbage"}', "malformed"),
        (b'{"after": "nan/ap-0123456789ab"}', "malformed"),
        (b'{"limit": 0}', "malformed"),
        (b'{"limit": 100000}', "malformed"),
        (b'{"principal": "x"}', "malformed"),
        (b"[1, 2", "malformed"),
        (b" " * 2048, "oversized"),
    ],
)
async def test_a_bad_page_query_is_refused_naming_why(kit: Any, body: bytes, code: str) -> None:
    found = await list_page(kit.store, kit.bus, body, SMALL)
    assert (found.ok, found.reason_code) == (False, code), found


async def test_show_gives_one_approval_in_full_and_a_joined_requests_id_shows_its_approval(kit: Any) -> None:
    await kit.approvals.on_decision(_decision(kit, "a", "y" * 5_000, key="same"))
    await kit.approvals.on_decision(_decision(kit, "b", "y" * 5_000, key="same"))  # joins a's approval
    for rid in ("a", "b"):
        shown = await show(kit.store, kit.bus, json.dumps({"approval_id": kit.approval_id(rid)}).encode(), SMALL)
        item = json.loads(bytes(shown.approval))
        assert (shown.ok, item["approval_id"], item["joined"]) == (True, kit.approval_id("a"), [kit.ns + "b"])
        assert item["request"]["arguments"]["content"] == "y" * 5_000
    unknown = await show(kit.store, kit.bus, b'{"approval_id": "ap-000000000000"}', SMALL)
    assert (unknown.ok, unknown.reason_code) == (False, "unknown_approval")
    bad = await show(kit.store, kit.bus, b'{"id": 1}', SMALL)
    assert (bad.ok, bad.reason_code) == (False, "malformed")


async def test_show_summarises_an_approval_too_large_for_one_message(kit: Any) -> None:
    await kit.approvals.on_decision(_decision(kit, "a", "z" * 20_000))
    shown = await show(kit.store, kit.bus, json.dumps({"approval_id": kit.approval_id("a")}).encode(), 8_192)
    assert shown.ok and "arguments left out" in shown.reason
    assert json.loads(bytes(shown.approval))["omitted"] == ["arguments"]


@pytest.fixture(scope="module")
def small_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A NATS server of its own whose ``max_payload`` is 64 KiB."""
    root = tmp_path_factory.mktemp("small-nats")
    (root / "nats.conf").write_text(f"max_payload: {SMALL}\n")
    with nats_server(root / "server", config=root / "nats.conf") as server:
        yield server.url


async def _serving(kit: Any, url: str) -> AsyncIterator[Client]:
    cell: RuntimeCell[ApprovalsRuntime] = RuntimeCell()
    cell.set(ApprovalsRuntime(kit.approvals, Rebuilder(kit.store, kit.bus, kit.key.public_key())))
    broker = NatsBroker(url)
    broker.include_router(build_router(cell))
    await broker.start()
    connection = await nats.connect(url)
    yield connection
    await connection.close()
    await broker.stop()


async def _listed_over(client: Client, **query: Any) -> list[dict[str, Any]]:
    pages, after = [], None
    for _ in range(100):
        reply = await client.request(Rpc.APPROVALS_LIST, json.dumps({"after": after, **query}).encode(), timeout=10)
        assert len(reply.data) <= client.max_payload
        found = json.loads(reply.data)
        assert found["ok"], found
        pages.append(found)
        if found["next"] is None:
            return pages
        after = found["next"]
    raise AssertionError("the listing did not end within 100 pages")


async def test_twenty_pending_writes_of_60_kb_are_listed_in_pages_at_the_default_limit(kit: Any, nats_url: str) -> None:
    opened = await _open(kit, 20, 60_000, step_s=1.0)
    async for client in _serving(kit, nats_url):
        pages = await _listed_over(client)
        assert [item["approval_id"] for p in pages for item in p["approvals"]] == opened
        assert len(pages) >= 2 and all(item["omitted"] == [] for p in pages for item in p["approvals"])


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_generated_sizes_and_limits_fit_a_64_kib_server_and_lose_nothing(
    kit: Any, small_nats: str, seed: int
) -> None:
    chance = random.Random(seed)
    sizes = [chance.choice([10, 900, 8_000, 40_000, 90_000]) for _ in range(chance.randint(5, 14))]
    opened = await _open(kit, len(sizes), sizes, step_s=1.0)
    async for client in _serving(kit, small_nats):
        for limit in (1, chance.randint(2, 5), 100):
            pages = await _listed_over(client, limit=limit, summary=chance.random() < 0.5)
            listed = [item for p in pages for item in p["approvals"]]
            assert [item["approval_id"] for item in listed] == opened
            assert all(size < 50_000 or item["omitted"] for size, item in zip(sizes, listed, strict=True))
        shown = json.loads(
            (await client.request(Rpc.APPROVALS_SHOW, json.dumps({"approval_id": opened[0]}).encode())).data
        )
        assert shown["ok"] and shown["approval"]["approval_id"] == opened[0]
