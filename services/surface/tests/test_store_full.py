"""An MCP call the gateway's full stream cannot take is answered with a tool error that says so, on a real
nats-server (the record stream at a small byte limit), through the real SDK, ledger and call flow; once there is
room again, the same call is sent."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import msgspec
import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import StreamConfig

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.integrity.signing import generate_keypair
from effectgate.contracts.rpc.listing import ToolsReply
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.devstack.full_store import fill_record_stream
from effectgate.devstack.records_reading import records_answered
from effectgate.devstack.servers import ServerProcess, nats_server
from effectgate.shared.stores.provision import ensure_bus, stream_config
from effectgate.surface.adapters.agents import Agents
from effectgate.surface.adapters.ledger import Ledger
from effectgate.surface.gateway import Gateway
from effectgate.surface.holding import Client as Asking
from effectgate.surface.holding import Waiting
from effectgate.surface.listings import Listing

pytestmark = [pytest.mark.connected, pytest.mark.nats_2_10]

AGENT = "mcp-agent"


class _Listings:
    def __init__(self, descriptor: ToolDescriptor) -> None:
        self.listing = Listing([descriptor], frozenset())

    async def of(self, principal: str) -> Listing:
        return self.listing


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with nats_server(tmp_path / "nats") as process:
        yield process


@pytest_asyncio.fixture
async def nc(server: ServerProcess, repo_root: Path) -> AsyncIterator[Client]:
    """The bus provisioned, and a stand-in for the policy's ``tg.tools.get`` (the SDK looks the tool up)."""
    connection = await nats.connect(server.url)
    await ensure_bus(connection.jetstream())
    descriptor = msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes(), type=ToolDescriptor)
    reply = msgspec.json.encode(ToolsReply(ok=True, reason_code="found", reason="found", descriptor=descriptor))

    async def answer(msg: Msg) -> None:
        await msg.respond(reply)

    await connection.subscribe(Rpc.tools_get(AGENT), cb=answer)
    async with records_answered(connection):  # and for the executor's tg.records.get (the SDK reads decisions)
        yield connection
    await connection.close()


@pytest_asyncio.fixture
async def gateway(server: ServerProcess, nc: Client, tmp_path: Path, repo_root: Path) -> AsyncIterator[Gateway]:
    keys = tmp_path / "keys"
    keys.mkdir()
    generate_keypair(keys, "receipts")
    descriptor = msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes(), type=ToolDescriptor)
    agents = Agents(server.url, None, keys)
    ledger = Ledger(await nc.jetstream().key_value(catalog.MCP_CALLS_BUCKET))
    yield Gateway(agents, _Listings(descriptor), ledger, Waiting(hold_s=0.3, progress_s=0.1))  # type: ignore[arg-type]
    await agents.aclose()


async def _full(nc: Client, max_bytes: int) -> None:
    await fill_record_stream(nc.jetstream(), max_bytes=max_bytes)


@pytest.mark.parametrize("max_bytes", [2_048, 16_384])
async def test_a_call_the_full_stream_cannot_take_is_a_tool_error_naming_the_full_store(
    nc: Client, gateway: Gateway, max_bytes: int
) -> None:
    await _full(nc, max_bytes)
    name = next(n for n, target in (await gateway.listing(AGENT)).targets.items() if target.operation == "read")
    result = await gateway.call(AGENT, name, {"path": "a.txt"}, None, Asking())
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error is True
    assert text.startswith("effectgate: not accepted (gateway_store_full): the gateway's store is full (maximum bytes")
    assert "was not accepted and will not run" in text
    with pytest.raises(nats.js.errors.NotFoundError):
        await nc.jetstream().get_last_msg(catalog.STREAM, Subjects.request(AGENT))
    await nc.jetstream().update_stream(StreamConfig.from_response(stream_config().as_dict()))
    again = await gateway.call(AGENT, name, {"path": "a.txt"}, None, Asking())
    assert "pending" in again.content[0].text  # type: ignore[union-attr]
    stored = await nc.jetstream().get_last_msg(catalog.STREAM, Subjects.request(AGENT))
    assert stored.data and b'"operation":"read"' in stored.data, "the same call is sent once there is room"
