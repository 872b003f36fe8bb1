"""The SDK raises the real error against a real nats-server: a timeout stays a timeout when the
connection goes, a request over the bus limit ends ``refused``/``oversized``, and a first connection
is retried quietly for a few seconds, then fails naming the URL."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import nats
import pytest
import pytest_asyncio

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.devstack.servers import ServerProcess
from effectgate.sdk import ToolClient
from effectgate.sdk.connecting import RETRY_DELAYS_S
from effectgate.sdk.errors import BusUnreachable
from effectgate.shared.stores.provision import ensure_bus

pytestmark = [pytest.mark.connected, pytest.mark.fault]

AGENT = "sdk-agent"
BAD_NAME = "Not A Tool!"
"""A tool name the SDK does not look up (it sends the request, and the policy would refuse it)."""


@pytest_asyncio.fixture
async def bus(server: ServerProcess) -> AsyncIterator[str]:
    nc = await nats.connect(server.url)
    await ensure_bus(nc.jetstream())
    await nc.close()
    yield server.url


async def test_a_receipt_timeout_stays_a_timeout_with_a_message_when_the_server_goes(
    server: ServerProcess, bus: str
) -> None:
    client = await ToolClient.connect(bus, AGENT, verify_receipts=False)
    request_id = await client.submit(BAD_NAME, "read", {})
    with pytest.raises(TimeoutError) as raised:
        async with client:
            server.kill()
            await client.receipt(request_id, timeout_s=1.0)
    assert type(raised.value) is TimeoutError
    assert f"no receipt for request {request_id} within 1 s" in str(raised.value)


async def test_an_argument_over_the_bus_limit_ends_refused_oversized_and_nothing_is_sent(bus: str) -> None:
    async with await ToolClient.connect(bus, AGENT, verify_receipts=False) as client:
        limit = client._nc.max_payload
        request_id = await client.submit(BAD_NAME, "read", {"content": "x" * (limit + 1)})
        receipt = await client.receipt(request_id, timeout_s=1.0)
    assert (receipt.outcome, receipt.reason_code, receipt.request_id) == ("refused", "oversized", request_id)
    assert f"the bus limit (NATS max_payload) is {limit}" in receipt.reason and receipt.signature == ""
    nc = await nats.connect(bus)
    try:
        with pytest.raises(nats.js.errors.NotFoundError):
            await nc.jetstream().get_last_msg(catalog.STREAM, Subjects.request(AGENT))
    finally:
        await nc.close()


async def test_an_unreachable_server_is_retried_quietly_then_named(
    server: ServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    server.stop()
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG), pytest.raises(BusUnreachable) as raised:
        await ToolClient.connect(server.url, AGENT, verify_receipts=False)
    waited = time.monotonic() - started
    assert sum(RETRY_DELAYS_S) <= waited < sum(RETRY_DELAYS_S) + 10
    assert f"cannot reach NATS at {server.url} ({len(RETRY_DELAYS_S) + 1} attempts" in str(raised.value)
    assert isinstance(raised.value, nats.errors.NoServersError)
    assert not [r for r in caplog.records if "NATS connection" in r.getMessage()], "no line per failed attempt"


async def test_a_server_that_comes_up_during_the_retries_is_connected_to(server: ServerProcess) -> None:
    server.stop()
    connecting = asyncio.ensure_future(ToolClient.connect(server.url, AGENT, verify_receipts=False))
    await asyncio.sleep(0.5)
    await asyncio.to_thread(server.restart)
    client = await asyncio.wait_for(connecting, timeout=15)
    try:
        assert client._nc.is_connected and client._nc.options["allow_reconnect"] is True
    finally:
        await client.close()
