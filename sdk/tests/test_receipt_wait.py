"""Where the SDK finds a receipt: from its subscription, and from the stream only when the subscription may have
missed it (a request it did not submit, a connection re-made since, a wait that ran out)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from nats.aio.client import Client

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ReceiptIssued, encode
from effectgate.contracts.vocabulary import Outcome
from effectgate.devstack.servers import ServerProcess
from effectgate.sdk import ToolClient

pytestmark = pytest.mark.connected

AGENT = "wait-agent"
BAD_NAME = "Not A Tool!"
"""A tool name the SDK does not look up, so ``submit`` sends at once."""


def _receipt(request_id: str) -> ReceiptIssued:
    return ReceiptIssued(
        event_id="e-" + request_id,
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        principal=AGENT,
        tool=BAD_NAME,
        outcome=Outcome.REFUSED,
        reason_code="invalid_tool",
        reason="no such tool",
    )


async def _store(nc: Client, request_id: str) -> None:
    await nc.jetstream().publish(
        Subjects.receipt(AGENT, request_id), encode(_receipt(request_id)), stream=catalog.STREAM
    )


def _count_stream_reads(client: ToolClient, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    stored = client._waiter._stored

    async def counted(request_id: str) -> Any:
        reads.append(request_id)
        return await stored(request_id)

    monkeypatch.setattr(client._waiter, "_stored", counted)
    return reads


async def test_a_receipt_of_a_request_this_client_submitted_comes_from_the_subscription_alone(
    nc: Client, server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await ToolClient.connect(server.url, AGENT, verify_receipts=False) as client:
        reads = _count_stream_reads(client, monkeypatch)
        early = await client.submit(BAD_NAME, "read", {})
        await _store(nc, early)  # it may arrive before the client asks for it
        await nc.flush()
        late = await client.submit(BAD_NAME, "read", {})
        assert (await client.receipt(early, timeout_s=5)).request_id == early
        await _store(nc, late)
        assert (await client.receipt(late, timeout_s=5)).request_id == late
    assert reads == []


async def test_a_receipt_stored_before_the_client_existed_is_read_from_the_stream(
    nc: Client, server: ServerProcess
) -> None:
    request_id = uuid.uuid4().hex
    await _store(nc, request_id)
    async with await ToolClient.connect(server.url, AGENT, verify_receipts=False) as client:
        assert (await client.receipt(request_id, timeout_s=5)).request_id == request_id


async def test_after_a_reconnect_a_receipt_the_subscription_missed_is_read_from_the_stream(
    nc: Client, server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await ToolClient.connect(server.url, AGENT, verify_receipts=False) as client:
        request_id = await client.submit(BAD_NAME, "read", {})
        await client._waiter._subscription.unsubscribe()  # what a disconnection does: the receipt is never heard
        await _store(nc, request_id)
        client._nc.stats["reconnects"] += 1
        monkeypatch.setattr(client._waiter, "_last_look", _never)  # found while waiting, not by the look at the end
        assert (await client.receipt(request_id, timeout_s=30)).request_id == request_id


async def test_a_receipt_the_subscription_dropped_is_still_found_when_the_wait_runs_out(
    nc: Client, server: ServerProcess
) -> None:
    async with await ToolClient.connect(server.url, AGENT, verify_receipts=False) as client:
        request_id = await client.submit(BAD_NAME, "read", {})
        await client._waiter._subscription.unsubscribe()  # a slow consumer's dropped message: never heard
        await _store(nc, request_id)
        assert (await client.receipt(request_id, timeout_s=0.5)).request_id == request_id


async def _never(request_id: str, timeout_s: float) -> ReceiptIssued:
    raise AssertionError(f"{request_id}: the wait ran out")


async def test_receipts_nobody_asked_for_are_kept_within_a_bound_and_still_found(
    nc: Client, server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("effectgate.sdk.waiting.MAX_UNCLAIMED", 3)
    async with await ToolClient.connect(server.url, AGENT, verify_receipts=False) as client:
        submitted = [await client.submit(BAD_NAME, "read", {}) for _ in range(5)]
        foreign = [uuid.uuid4().hex for _ in range(5)]  # another process's requests of the same principal
        for request_id in [*submitted, *foreign]:
            await _store(nc, request_id)
        await nc.flush()
        for _ in range(50):
            if len(client._waiter._arrived) >= 3:
                break
            await asyncio.sleep(0.05)
        assert len(client._waiter._waiting) <= 3 and len(client._waiter._arrived) <= 3
        for request_id in (submitted[0], submitted[-1], foreign[0]):  # forgotten or kept: each is found
            assert (await client.receipt(request_id, timeout_s=5)).request_id == request_id
