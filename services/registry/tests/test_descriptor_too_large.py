"""A descriptor larger than the bus carries is refused by name before anything is written, on every publishing path.

Real NATS: the session server (``max_payload`` 1 MiB) for the start-up paths, with an MCP
server listing 3,000 tools; a server of its own with a small ``max_payload`` for
``tg.registry.publish``, where a request that fits can hold a descriptor that does not.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.integrity.signing import sign_value
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.devstack.servers import nats_server
from effectgate.registry.adapters.mcp_import import import_mcp_server
from effectgate.registry.app import _publish
from effectgate.registry.handlers import build_router
from effectgate.registry.service import Registry
from effectgate.shared.mcp.servers import McpServerConfig
from effectgate.shared.runtime.assembly import RuntimeCell
from effectgate.shared.stores.provision import ensure_bus
from effectgate.shared.stores.tools_kv import REPLY_MARGIN_BYTES, ToolsBucket

SCRIPT = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "mcp" / "scripted_server.py"
OPERATOR = Ed25519PrivateKey.generate()
SMALL_PAYLOAD = 16 * 1024


def _descriptor(name: str, operations: int, text: str = "", adapter: str = "file_system") -> ToolDescriptor:
    schema = {"type": "object", "properties": {"q": {"type": "string", "description": text}}}
    spec = OperationSpec(
        input_schema=schema,
        output_schema={"type": "object"},
        side_effect_class=SideEffectClass.READ_ONLY,
        risk_tier=RiskTier.LOW,
    )
    return ToolDescriptor(
        name=name, version="1.0.0", adapter=adapter, operations={f"op{i}": spec for i in range(operations)}
    )


class Announced(list[Any]):
    async def __call__(self, subject: str, event: Any) -> object:
        self.append(event)
        return None


@pytest.fixture
async def announced() -> Announced:
    return Announced()


async def _serving(nats_url: str, registry: Registry) -> AsyncIterator[Client]:
    """The registry's request handlers on a broker of their own, and a client connection."""
    cell: RuntimeCell[Registry] = RuntimeCell()
    cell.set(registry)
    broker = NatsBroker(nats_url)
    broker.include_router(build_router(cell))
    await broker.start()
    client = await nats.connect(nats_url)
    try:
        yield client
    finally:
        await client.close()
        await broker.stop()


async def _ask(client: Client, subject: str, body: Any) -> dict[str, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply: dict[str, Any] = json.loads((await client.request(subject, data, timeout=5)).data)
    return reply


def _huge_listing(tmp_path: Path, server: str) -> McpServerConfig:
    """A scripted MCP server listing 3,000 tools (its descriptor well over 1 MiB)."""
    schema = {"type": "object", "properties": {"path": {"type": "string", "description": "a file " * 40}}}
    tools = [{"name": f"tool_{i}", "inputSchema": schema, "annotations": {"readOnlyHint": True}} for i in range(3000)]
    definitions = tmp_path / "tools.json"
    definitions.write_text(json.dumps({"version": "1.0.0", "workdir": str(tmp_path), "tools": tools}))
    return McpServerConfig(name=server, command=sys.executable, args=[str(SCRIPT), str(definitions)], trust_hints=True)


async def test_a_listing_of_3000_tools_is_refused_by_name_and_nothing_is_stored(
    js: JetStreamContext, nats_url: str, ns: str, tmp_path: Path, announced: Announced, caplog: pytest.LogCaptureFixture
) -> None:
    bucket = await ToolsBucket.open(js)
    registry = Registry(bucket=bucket, publish_event=announced, clock=lambda: datetime.now(UTC))
    listing = await import_mcp_server(_huge_listing(tmp_path, ns), timeout_s=60.0)
    size = len(msgspec.json.encode(listing))
    assert size > bucket.max_payload

    with caplog.at_level(logging.INFO, logger="effectgate.registry"):
        await _publish(registry, listing)  # what start-up does with an MCP listing: logged, never raised
        await _publish(registry, _descriptor(f"{ns}x", 3000, "a file " * 40))  # and with a descriptor file's

    refusals = [r.getMessage() for r in caplog.records if r.getMessage().startswith("not published: ")]
    assert len(refusals) == 2 and all("descriptor_too_large" in refusal for refusal in refusals)
    assert f"mcp_{ns}@1.0.0 is {size} bytes" in refusals[0]
    assert f"at most {bucket.max_payload - REPLY_MARGIN_BYTES} bytes" in refusals[0]
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("effectgate.registry")]
    assert not warned  # no version was chosen for it
    for tool in (f"mcp_{ns}", f"{ns}x"):
        assert await bucket.latest_version(tool) is None and await bucket.get(tool, "1.0.0") is None
    assert announced == []

    await _publish(registry, _descriptor(f"{ns}ok", 2))  # the registry keeps serving
    async for client in _serving(nats_url, registry):
        reply = await _ask(client, Rpc.REGISTRY_GET, {"tool": f"{ns}ok"})
        assert reply["ok"] and reply["descriptor"]["name"] == f"{ns}ok"
        assert (await _ask(client, Rpc.REGISTRY_GET, {"tool": f"mcp_{ns}"}))["reason_code"] == "unknown_tool"


@pytest.fixture(scope="module")
def small_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A NATS server of its own whose ``max_payload`` is 16 KiB."""
    root = tmp_path_factory.mktemp("small-nats")
    config = root / "nats.conf"
    config.write_text(f"max_payload: {SMALL_PAYLOAD}\n")
    with nats_server(root / "server", config=config) as server:
        yield server.url


@pytest.fixture
async def small_registry(small_nats: str, announced: Announced) -> AsyncIterator[tuple[Registry, Client]]:
    setup = await nats.connect(small_nats)
    await ensure_bus(setup.jetstream())
    bucket = await ToolsBucket.open(setup.jetstream())
    clock = lambda: datetime.now(UTC)  # noqa: E731
    registry = Registry(bucket, announced, clock, operator_key=OPERATOR.public_key())
    async for client in _serving(small_nats, registry):
        yield registry, client
    await setup.close()


def _signed(descriptor: ToolDescriptor) -> dict[str, Any]:
    body = msgspec.to_builtins(descriptor)
    return {"descriptor": body, "signature": sign_value(body, OPERATOR)}


@pytest.mark.connected  # a nats-server of its own (small max_payload)
async def test_over_the_bus_a_descriptor_the_bus_cannot_carry_is_answered_with_the_refusal(
    small_registry: tuple[Registry, Client], ns: str, announced: Announced
) -> None:
    registry, client = small_registry
    big = _descriptor(ns, 1, "x" * (SMALL_PAYLOAD - REPLY_MARGIN_BYTES))
    request = json.dumps(_signed(big)).encode()
    assert len(request) < SMALL_PAYLOAD  # the request fits the bus; its descriptor would not fit an answer

    reply = await _ask(client, Rpc.REGISTRY_PUBLISH, request)

    assert not reply["ok"] and reply["reason_code"] == "descriptor_too_large"
    size = len(msgspec.json.encode(big))
    assert f"{ns}@1.0.0 is {size} bytes" in reply["reason"]
    assert f"at most {SMALL_PAYLOAD - REPLY_MARGIN_BYTES} bytes" in reply["reason"]
    assert await registry.bucket.latest_version(ns) is None and announced == []
    small = _descriptor(ns, 1, "fits")
    assert (await _ask(client, Rpc.REGISTRY_PUBLISH, _signed(small)))["reason_code"] == "published"


@pytest.mark.connected  # a nats-server of its own (small max_payload)
async def test_a_listing_larger_than_the_bus_carries_is_answered_reply_too_large(
    small_registry: tuple[Registry, Client], ns: str
) -> None:
    registry, client = small_registry
    for i in range(3):
        await registry.publish(_descriptor(f"{ns}{i}", 1, "y" * (SMALL_PAYLOAD // 2)))

    reply = await _ask(client, Rpc.REGISTRY_LIST, {})

    assert not reply["ok"] and reply["reason_code"] == "reply_too_large"
    assert f"the bus carries at most {SMALL_PAYLOAD}" in reply["reason"]
    assert (await _ask(client, Rpc.REGISTRY_GET, {"tool": f"{ns}0"}))["ok"]
