"""A request the gateway's stream has no room for is refused clearly, against a real nats-server: the SDK raises
``GatewayStoreFull`` (the request was not accepted), never nats-py's raw error or a timeout, and nothing is stored."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.js.api import DiscardPolicy, StreamConfig

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.bus.stream_limits import store_full
from effectgate.devstack.full_store import fill_record_stream
from effectgate.devstack.servers import ServerProcess, nats_server
from effectgate.sdk import GatewayStoreFull, ToolClient
from effectgate.shared.stores.provision import ensure_bus, stream_config

pytestmark = pytest.mark.connected

AGENT = "sdk-agent"
BAD_NAME = "Not A Tool!"
"""A tool name the SDK does not look up (it sends the request at once)."""


async def _limited(nc: Client, **limits: object) -> None:
    """The record stream with ``limits`` and the ``new`` discard policy, then filled to them by another principal."""
    await fill_record_stream(nc.jetstream(), **limits)


async def _server_storage_filled(nc: Client) -> None:
    js = nc.jetstream()
    while True:
        try:
            await js.publish(Subjects.request("filler"), b"x" * 4096, stream=catalog.STREAM)
        except nats.js.errors.APIError as error:
            assert store_full(error), error
            return


@pytest.fixture
def small_store(tmp_path: Path) -> Iterator[ServerProcess]:
    """A nats-server whose JetStream has 256 KiB of file storage in all."""
    config = tmp_path / "nats.conf"
    config.write_text("jetstream { max_file_store: 262144 }\n")
    with nats_server(tmp_path / "small", config=config) as process:
        yield process


Fill = Callable[[Client], Awaitable[None]]


async def _stream_bytes(nc: Client) -> None:
    await _limited(nc, max_bytes=4096)


async def _stream_messages(nc: Client) -> None:
    await _limited(nc, max_msgs=3)


async def _subject_messages(nc: Client) -> None:
    js = nc.jetstream()
    config = {**stream_config().as_dict(), "max_msgs_per_subject": 1, "discard": DiscardPolicy.NEW}
    config["discard_new_per_subject"] = True
    await js.update_stream(StreamConfig.from_response(config))
    await js.publish(Subjects.request(AGENT), b"{}", stream=catalog.STREAM)


@pytest_asyncio.fixture
async def provisioned(server: ServerProcess) -> AsyncIterator[Client]:
    connection = await nats.connect(server.url)
    await ensure_bus(connection.jetstream())
    yield connection
    await connection.close()


@pytest.mark.parametrize(
    ("fill", "limit"),
    [
        pytest.param(_stream_bytes, "maximum bytes exceeded", marks=pytest.mark.nats_2_10),
        (_stream_messages, "maximum messages exceeded"),
        (_subject_messages, "maximum messages per subject exceeded"),
    ],
    ids=["max-bytes", "max-msgs", "max-msgs-per-subject"],
)
async def test_a_request_the_full_stream_refuses_raises_gateway_store_full(
    server: ServerProcess, provisioned: Client, fill: Fill, limit: str
) -> None:
    await fill(provisioned)
    before = (await provisioned.jetstream().stream_info(catalog.STREAM)).state.messages
    async with await ToolClient.connect(server.url, AGENT, verify_receipts=False) as client:
        with pytest.raises(GatewayStoreFull) as raised:
            await client.submit(BAD_NAME, "read", {}, request_id="req-full-1")
        with pytest.raises(GatewayStoreFull):
            await client.invoke(BAD_NAME, "read", {}, timeout_s=1.0)
    assert raised.value.request_id == "req-full-1" and raised.value.limit == limit
    assert str(raised.value).startswith(f"the gateway's store is full ({limit}): request req-full-1 was not accepted")
    assert (await provisioned.jetstream().stream_info(catalog.STREAM)).state.messages == before, "nothing stored"
    assert not client._waiter._waiting, "no wait is left for a request that was not accepted"


async def test_a_server_out_of_storage_raises_gateway_store_full(small_store: ServerProcess) -> None:
    nc = await nats.connect(small_store.url)
    try:
        await ensure_bus(nc.jetstream())
        await _server_storage_filled(nc)
        async with await ToolClient.connect(small_store.url, AGENT, verify_receipts=False) as client:
            with pytest.raises(GatewayStoreFull, match=r"store is full \(insufficient resources\)"):
                await client.submit(BAD_NAME, "read", {"note": "x" * 4096})
    finally:
        await nc.close()


async def test_a_stream_with_room_still_takes_the_request(server: ServerProcess, provisioned: Client) -> None:
    js = provisioned.jetstream()
    await js.update_stream(StreamConfig.from_response({**stream_config().as_dict(), "max_bytes": 1_000_000}))
    async with await ToolClient.connect(server.url, AGENT, verify_receipts=False) as client:
        request_id = await client.submit(BAD_NAME, "read", {})
    stored = await js.get_last_msg(catalog.STREAM, Subjects.request(AGENT))
    assert stored.headers and stored.headers.get("Nats-Msg-Id") == request_id
