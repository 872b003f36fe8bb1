"""A streaming call's progress, as the executor relays it on ``tg.progress.<p>.<request id>``, reaches the MCP client
that asked for progress as ordered ``notifications/progress`` of its token while the call is held, and none after
its result; a call without a progress token is not even listened for. On a real nats-server, through the real SDK,
ledger, call flow and MCP server, with an MCP client in memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
import pytest_asyncio
from mcp import Client as McpClient
from mcp.server.lowlevel import Server
from mcp_types import ProgressNotification
from nats.aio.client import Client
from nats.aio.msg import Msg

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.events import ReceiptIssued, encode
from effectgate.contracts.integrity.signing import generate_keypair, load_private_key, sign_event
from effectgate.contracts.rpc.listing import ToolsReply
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.hosting import CallProgress
from effectgate.contracts.vocabulary import Outcome
from effectgate.devstack.records_reading import records_answered
from effectgate.devstack.servers import ServerProcess, nats_server
from effectgate.shared.stores.provision import ensure_bus
from effectgate.surface.adapters.agents import Agents
from effectgate.surface.adapters.cancel_relay import CancelRelay
from effectgate.surface.adapters.ledger import Ledger
from effectgate.surface.cancels import Cancels
from effectgate.surface.gateway import Gateway
from effectgate.surface.handlers import build_server
from effectgate.surface.holding import Waiting
from effectgate.surface.listings import Listing
from effectgate.surface.notices import Notices

pytestmark = pytest.mark.connected

AGENT = "progress-agent"
TOOL = "file_system__read"
READ = {"path": "a.txt", "content": "abc", "size_bytes": 3, "sha256": "0" * 64}


class _Listings:
    def __init__(self, descriptor: ToolDescriptor) -> None:
        self.listing = Listing([descriptor], frozenset())

    async def of(self, principal: str) -> Listing:
        return self.listing

    async def refresh(self) -> list[str]:
        return []


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with nats_server(tmp_path / "nats") as process:
        yield process


@pytest.fixture
def descriptor(repo_root: Path) -> ToolDescriptor:
    return msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes(), type=ToolDescriptor)


@pytest_asyncio.fixture
async def nc(server: ServerProcess, descriptor: ToolDescriptor) -> AsyncIterator[Client]:
    """The bus provisioned; stand-ins for the policy's ``tg.tools.get`` and the executor's records."""
    connection = await nats.connect(server.url)
    await ensure_bus(connection.jetstream())
    reply = msgspec.json.encode(ToolsReply(ok=True, reason_code="found", reason="found", descriptor=descriptor))

    async def answer(msg: Msg) -> None:
        await msg.respond(reply)

    await connection.subscribe(Rpc.tools_get(AGENT), cb=answer)
    async with records_answered(connection):
        yield connection
    await connection.close()


@pytest_asyncio.fixture
async def surface(
    server: ServerProcess, nc: Client, tmp_path: Path, descriptor: ToolDescriptor
) -> AsyncIterator[Server[Any]]:
    """The surface's MCP server, acting as :data:`AGENT` (its MCP client is the test's: in memory, 2025-11-25)."""
    generate_keypair(tmp_path / "keys", "receipts")
    agents = Agents(server.url, None, tmp_path / "keys")
    ledger = Ledger(await nc.jetstream().key_value(catalog.MCP_CALLS_BUCKET))
    gateway = Gateway(agents, _Listings(descriptor), ledger, Waiting(hold_s=8.0, progress_s=0.5))  # type: ignore[arg-type]
    yield build_server(gateway, Notices(), CancelRelay(nc, Cancels()), AGENT, "0")
    await agents.aclose()


async def _sent(nc: Client) -> asyncio.Queue[str]:
    """The request ids the surface sends, as they are stored."""
    ids: asyncio.Queue[str] = asyncio.Queue()

    async def heard(msg: Msg) -> None:
        ids.put_nowait(msgspec.json.decode(msg.data)["request_id"])

    await nc.subscribe(Subjects.request(AGENT), cb=heard)
    await nc.flush()
    return ids


async def _progress(nc: Client, request_id: str, items: int) -> None:
    body = msgspec.json.encode(CallProgress(request_id=request_id, items=items, message=f"{items} rows"))
    await nc.publish(Subjects.progress(AGENT, request_id), body)
    await nc.flush()


async def _receipt(nc: Client, keys: Path, request_id: str) -> None:
    unsigned = ReceiptIssued(
        event_id="e-" + request_id,
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        principal=AGENT,
        tool="file_system",
        outcome=Outcome.SUCCEEDED,
        reason_code="ok",
        reason="ran",
        result=READ,
    )
    receipt = sign_event(unsigned, load_private_key(keys / "receipts.key"))
    await nc.jetstream().publish(Subjects.receipt(AGENT, request_id), encode(receipt), stream=catalog.STREAM)


async def _listened(nc: Client, request_id: str) -> bool:
    """Whether anyone subscribes to the call's progress subject (no one: the server says no responders)."""
    try:
        await nc.request(Subjects.progress(AGENT, request_id), b"", timeout=0.5)
    except nats.errors.NoRespondersError:
        return False
    except nats.errors.TimeoutError:
        return True
    return True


async def test_a_streaming_call_s_progress_reaches_the_client_in_order_and_none_after_its_result(
    surface: Server[Any], nc: Client, tmp_path: Path
) -> None:
    heard: list[tuple[float, str | None]] = []
    after: list[Any] = []
    answered = asyncio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        (after if answered.is_set() else heard).append((progress, message))

    ids = await _sent(nc)
    async with McpClient(surface, mode="legacy") as mcp:
        call = asyncio.ensure_future(mcp.call_tool(TOOL, {"path": "a.txt"}, progress_callback=on_progress))
        request_id = await asyncio.wait_for(ids.get(), 10)
        assert await _listened(nc, request_id)  # from before the request was sent
        for items in (1, 2, 3):
            await _progress(nc, request_id, items)
            await asyncio.sleep(0.3)  # apart by more than the throttle's gap: each is sent
        await _receipt(nc, tmp_path / "keys", request_id)
        result = await asyncio.wait_for(call, 10)
        answered.set()
        await _progress(nc, request_id, 4)
        await asyncio.sleep(0.5)
    assert result.is_error is False and result.structured_content == READ
    items = [(progress, message) for progress, message in heard if message and message.endswith(" rows")]
    assert items == [(1.0, "1 rows"), (2.0, "2 rows"), (3.0, "3 rows")]
    assert [progress for progress, _ in heard] == sorted({progress for progress, _ in heard})  # each above the last
    assert after == []
    assert not await _listened(nc, request_id)


async def test_a_call_without_a_progress_token_gets_no_progress_and_is_not_listened_for(
    surface: Server[Any], nc: Client, tmp_path: Path
) -> None:
    notices: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ProgressNotification):
            notices.append(message)

    ids = await _sent(nc)
    async with McpClient(surface, mode="legacy", message_handler=on_message) as mcp:
        call = asyncio.ensure_future(mcp.call_tool(TOOL, {"path": "a.txt"}))
        request_id = await asyncio.wait_for(ids.get(), 10)
        await _progress(nc, request_id, 1)
        assert not await _listened(nc, request_id)
        await _receipt(nc, tmp_path / "keys", request_id)
        assert (await asyncio.wait_for(call, 10)).is_error is False
    assert notices == []
