"""``effectgate call`` against a real nats-server whose record stream is full at its byte limit: it says the
gateway's store is full and the call was not accepted, and exits 8 — no traceback, no "waiting for an approval"."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import msgspec
import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.aio.msg import Msg

from effectgate.cli.commands.call import NOT_ACCEPTED
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.integrity.signing import generate_keypair
from effectgate.contracts.rpc.listing import ToolsReply
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.devstack.full_store import fill_record_stream
from effectgate.devstack.servers import ServerProcess, nats_server
from effectgate.shared.stores.provision import ensure_bus

pytestmark = [pytest.mark.connected, pytest.mark.nats_2_10]

AGENT = "cli-agent"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with nats_server(tmp_path / "nats") as process:
        yield process


@pytest_asyncio.fixture
async def full(server: ServerProcess, repo_root: Path) -> AsyncIterator[Client]:
    """The bus with its record stream full at 4 KiB, and a stand-in for the policy's ``tg.tools.get``."""
    nc = await nats.connect(server.url)
    js = nc.jetstream()
    await ensure_bus(js)
    descriptor = msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes(), type=ToolDescriptor)
    reply = msgspec.json.encode(ToolsReply(ok=True, reason_code="found", reason="found", descriptor=descriptor))

    async def answer(msg: Msg) -> None:
        await msg.respond(reply)

    await nc.subscribe(Rpc.tools_get(AGENT), cb=answer)
    await fill_record_stream(js, max_bytes=4_096)
    yield nc
    await nc.close()


async def test_call_says_the_store_is_full_and_exits_not_accepted(
    server: ServerProcess, full: Client, tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    generate_keypair(keys, "receipts")
    env = {**os.environ, "EFFECTGATE_STATE_DIR": str(tmp_path / "state"), "EFFECTGATE_PUBLIC_KEYS_DIR": str(keys)}
    command = [sys.executable, "-m", "effectgate.cli", "call", "file_system", "read", "--args", '{"path": "a.txt"}']
    process = await asyncio.create_subprocess_exec(
        *command,
        "--as",
        AGENT,
        "--nats-url",
        server.url,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    text = " ".join((out + err).decode().split())
    assert process.returncode == NOT_ACCEPTED == 8, text
    assert "not accepted: the gateway's store is full (maximum bytes exceeded)" in text
    assert "Traceback" not in text and "approval" not in text
