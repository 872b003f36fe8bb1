"""Every registry request is answered on real NATS: a lookup of what cannot exist, and any fault, with a reason code."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import nats
import nats.errors
import pytest
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import Rpc
from effectgate.registry.handlers import build_router
from effectgate.registry.service import Registry
from effectgate.shared.runtime.assembly import RuntimeCell
from effectgate.shared.stores.tools_kv import ToolsBucket


async def _announce(subject: str, event: Any) -> object:
    return None


@pytest.fixture
async def served(js: JetStreamContext, nats_url: str) -> AsyncIterator[tuple[RuntimeCell[Registry], Client]]:
    """The registry's request handlers on a broker of their own (the cell filled), and a client connection."""
    cell: RuntimeCell[Registry] = RuntimeCell()
    cell.set(Registry(bucket=await ToolsBucket.open(js), publish_event=_announce, clock=lambda: datetime.now(UTC)))
    broker = NatsBroker(nats_url)
    broker.include_router(build_router(cell))
    await broker.start()
    client = await nats.connect(nats_url)
    yield cell, client
    await client.close()
    await broker.stop()


async def _ask(client: Client, subject: str, body: bytes) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads((await client.request(subject, body, timeout=5)).data)
    return reply


def _lookup(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (_lookup(tool="a b"), "invalid_tool"),
        (_lookup(tool="nope\u001b[2J"), "invalid_tool"),
        (_lookup(tool=""), "invalid_tool"),
        (_lookup(tool="a.b"), "invalid_tool"),
        (_lookup(tool=">"), "invalid_tool"),
        (_lookup(tool="*"), "invalid_tool"),
        (_lookup(tool="File_System"), "invalid_tool"),
        (_lookup(tool="x" * 10_000), "invalid_tool"),
        (_lookup(tool="state"), "unknown_tool"),
        (_lookup(tool="file_system", version="*"), "invalid_version"),
        (_lookup(tool="file_system", version=">"), "invalid_version"),
        (_lookup(tool="file_system", version="1.0.0.>"), "invalid_version"),
        (_lookup(tool="file_system", version="1.0"), "invalid_version"),
        (_lookup(tool="file_system", version=""), "invalid_version"),
        (_lookup(tool="file_system", version="1.0.0\n"), "invalid_version"),
        (_lookup(tool="no_such_tool_here", version="1.0.0"), "unknown_tool"),
        (_lookup(tool=1), "malformed"),
        (_lookup(version="1.0.0"), "malformed"),
        (_lookup(tool="file_system", extra=True), "malformed"),
        (b"not json", "malformed"),
        (b"", "malformed"),
        (b"[" * 10_000, "malformed"),
    ],
)
async def test_a_lookup_of_what_cannot_exist_is_answered_with_its_reason_code(
    served: tuple[RuntimeCell[Registry], Client], body: bytes, code: str
) -> None:
    reply = await _ask(served[1], Rpc.REGISTRY_GET, body)
    assert (reply["ok"], reply["reason_code"]) == (False, code), reply
    assert "\u001b" not in reply["reason"]  # the answer never repeats what it refuses


async def test_the_registry_answers_while_it_is_starting(js: JetStreamContext, nats_url: str) -> None:
    broker = NatsBroker(nats_url)
    broker.include_router(build_router(RuntimeCell()))
    await broker.start()
    client = await nats.connect(nats_url)
    try:
        for subject in (Rpc.REGISTRY_GET, Rpc.REGISTRY_LIST, Rpc.REGISTRY_PUBLISH):
            reply = await _ask(client, subject, _lookup(tool="file_system"))
            assert (reply["ok"], reply["reason_code"]) == (False, "not_ready"), reply
    finally:
        await client.close()
        await broker.stop()


@pytest.mark.parametrize(
    ("fault", "code"),
    [(nats.errors.TimeoutError(), "bucket_unavailable"), (ValueError("stored value unreadable"), "internal_error")],
)
async def test_a_fault_in_a_handler_is_answered_with_a_code_naming_it(
    served: tuple[RuntimeCell[Registry], Client], monkeypatch: pytest.MonkeyPatch, fault: Exception, code: str
) -> None:
    cell, client = served

    async def failing(*args: Any, **kwargs: Any) -> Any:
        raise fault

    monkeypatch.setattr(cell().bucket, "get", failing)
    monkeypatch.setattr(cell().bucket, "list", failing)
    for subject in (Rpc.REGISTRY_GET, Rpc.REGISTRY_LIST):
        reply = await _ask(client, subject, _lookup(tool="file_system"))
        assert (reply["ok"], reply["reason_code"]) == (False, code), reply
        assert type(fault).__name__ in reply["reason"]
