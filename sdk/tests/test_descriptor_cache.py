"""The SDK looks a tool's descriptor up once per ``descriptor_max_age_s``, not before every call."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import nats
import pytest
from nats.aio.client import Client

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.events import ReceiptIssued, encode
from effectgate.contracts.rpc.listing import ToolsReply
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.vocabulary import Outcome
from effectgate.devstack.servers import ServerProcess
from effectgate.sdk import ToolClient

pytestmark = pytest.mark.connected

AGENT = "cache-agent"


@pytest.fixture
def descriptor(repo_root: Path) -> ToolDescriptor:
    return msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes(), type=ToolDescriptor)


async def answering(nc: Client, descriptor: ToolDescriptor) -> list[bytes]:
    """A stand-in policy service answering ``tg.tools.get.<agent>``; returns the list of questions it got."""
    asked: list[bytes] = []

    async def answer(msg: nats.aio.msg.Msg) -> None:
        asked.append(msg.data)
        await msg.respond(
            msgspec.json.encode(ToolsReply(ok=True, reason_code="found", reason="", descriptor=descriptor))
        )

    await nc.subscribe(Rpc.tools_get(AGENT), cb=answer)
    return asked


async def test_calls_within_the_age_share_one_lookup_and_an_older_one_is_asked_again(
    nc: Client, server: ServerProcess, descriptor: ToolDescriptor
) -> None:
    asked = await answering(nc, descriptor)
    async with await ToolClient.connect(server.url, AGENT, verify_receipts=False, sealing_key=None) as client:
        client.descriptor_max_age_s = 0.5
        for index in range(3):
            await client.submit("file_system", "read", {"path": f"{index}.txt"})
        assert len(asked) == 1
        await asyncio.sleep(0.6)
        await client.submit("file_system", "read", {"path": "late.txt"})
        assert len(asked) == 2


async def test_a_call_refused_for_its_sealing_makes_the_next_one_ask_again(
    nc: Client, server: ServerProcess, descriptor: ToolDescriptor
) -> None:
    asked = await answering(nc, descriptor)
    async with await ToolClient.connect(server.url, AGENT, verify_receipts=False, sealing_key=None) as client:
        request_id = await client.submit("file_system", "read", {"path": "a.txt"})
        refused = ReceiptIssued(
            event_id="e-" + request_id,
            occurred_at=datetime.now(UTC),
            request_id=request_id,
            principal=AGENT,
            tool="file_system",
            outcome=Outcome.REFUSED,
            reason_code="secret_not_sealed",
            reason="/password: a secret argument sent in clear",
        )
        await nc.jetstream().publish(Subjects.receipt(AGENT, request_id), encode(refused), stream=catalog.STREAM)
        assert (await client.receipt(request_id, timeout_s=5)).reason_code == "secret_not_sealed"
        await client.submit("file_system", "read", {"path": "b.txt"})
    assert len(asked) == 2
