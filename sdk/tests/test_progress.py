"""``on_progress`` hears a streaming call's progress as the executor relays it, in order, only while the call is
awaited, and only what is a progress of that call."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import msgspec
import pytest
from nats.aio.client import Client

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ReceiptIssued, encode
from effectgate.contracts.tools.hosting import CallProgress
from effectgate.contracts.vocabulary import Outcome
from effectgate.devstack.servers import ServerProcess
from effectgate.sdk import ToolClient

pytestmark = pytest.mark.connected

AGENT = "progress-agent"
BAD_NAME = "Not A Tool!"
"""A tool name the SDK does not look up, so ``submit`` sends at once."""


async def _progress(nc: Client, request_id: str, items: int, message: str = "") -> None:
    body = msgspec.json.encode(CallProgress(request_id=request_id, items=items, message=message))
    await nc.publish(Subjects.progress(AGENT, request_id), body)


async def _receipt(nc: Client, request_id: str) -> None:
    receipt = ReceiptIssued(
        event_id="e-" + request_id,
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        principal=AGENT,
        tool=BAD_NAME,
        outcome=Outcome.SUCCEEDED,
        reason_code="ok",
        reason="ran",
        result=[1, 2, 3],
    )
    await nc.jetstream().publish(Subjects.receipt(AGENT, request_id), encode(receipt), stream=catalog.STREAM)


async def _sent(nc: Client) -> asyncio.Queue[str]:
    """The request ids the agent sends, as they are stored."""
    ids: asyncio.Queue[str] = asyncio.Queue()

    async def heard(msg: object) -> None:
        ids.put_nowait(msgspec.json.decode(msg.data)["request_id"])  # type: ignore[attr-defined]

    await nc.subscribe(Subjects.request(AGENT), cb=heard)
    await nc.flush()
    return ids


async def test_on_progress_hears_the_call_s_progress_in_order_and_nothing_after_it_returned(
    nc: Client, server: ServerProcess
) -> None:
    heard: list[tuple[int, str]] = []
    ids = await _sent(nc)
    async with await ToolClient.connect(server.url, AGENT, verify_receipts=False) as client:
        call = asyncio.ensure_future(
            client.invoke(BAD_NAME, "read", {}, timeout_s=10, on_progress=lambda n, m: heard.append((n, m)))
        )
        request_id = await asyncio.wait_for(ids.get(), 10)
        for items in (1, 2, 3):
            await _progress(nc, request_id, items, f"item {items}")
        await _progress(nc, "another", 9)  # another request's, on this request's subject
        await nc.publish(Subjects.progress(AGENT, request_id), b"not progress")
        await nc.flush()
        await asyncio.sleep(0.3)
        await _receipt(nc, request_id)
        assert (await call).result == [1, 2, 3]
        await _progress(nc, request_id, 4, "after the receipt")
        await nc.flush()
        await asyncio.sleep(0.3)
    assert heard == [(1, "item 1"), (2, "item 2"), (3, "item 3")]


async def test_a_coroutine_on_progress_is_awaited_and_one_that_raises_does_not_end_the_call(
    nc: Client, server: ServerProcess
) -> None:
    heard: list[int] = []

    async def on_progress(items: int, message: str) -> None:
        heard.append(items)
        if items == 1:
            raise RuntimeError("the caller's fault")

    ids = await _sent(nc)
    async with await ToolClient.connect(server.url, AGENT, verify_receipts=False) as client:
        call = asyncio.ensure_future(client.invoke(BAD_NAME, "read", {}, timeout_s=10, on_progress=on_progress))
        request_id = await asyncio.wait_for(ids.get(), 10)
        await _progress(nc, request_id, 1)
        await _progress(nc, request_id, 2)
        await nc.flush()
        await asyncio.sleep(0.3)
        await _receipt(nc, request_id)
        assert (await call).request_id == request_id
    assert heard == [1, 2]
