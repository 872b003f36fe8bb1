"""An agent lists a large registry on real NATS: the policy's listing in pages, the SDK reads every one.

The policy service's request handlers (over an in-memory registry and the shipped policy)
on the session's server (1 MiB ``max_payload``) and on one of 64 KiB; the SDK's
``ToolClient.list_tools`` as an agent calls it. Four hundred tools of up to 12 kB each do
not fit one message; a tool too large for a page alone is looked up whole when it fits a
``get``, and named in a warning when it fits nothing.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nats
import pytest
from faststream.nats import NatsBroker

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.tools.descriptors import OperationSpec, RateLimit, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.devstack.servers import nats_server
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.handlers.routes import build_router
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.service import PolicyPorts
from effectgate.sdk import ToolClient
from effectgate.sdk.receipts import ReceiptVerifier

pytestmark = pytest.mark.connected

DIRECTORY = (
    '[principals.a1]\nautonomy = 1\n[approvers.alice]\nroles = ["operator", "sre", "finance", "security"]\n'
    '[approvers.bob]\nroles = ["finance", "security"]\n'
)
SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": False}


def _tool(
    name: str, description_chars: int, side_effect: SideEffectClass = SideEffectClass.READ_ONLY
) -> ToolDescriptor:
    operation = OperationSpec(
        input_schema=SCHEMA, output_schema={}, side_effect_class=side_effect, risk_tier=RiskTier.LOW
    )
    return ToolDescriptor(
        name=name,
        version="1.0.0",
        adapter="file_system",
        operations={"run": operation},
        rate_limit=RateLimit(calls=5, period_s=60),
        description="d" * description_chars,
    )


@pytest.fixture(scope="module")
def small_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("small-nats")
    (root / "nats.conf").write_text("max_payload: 65536\n")
    with nats_server(root / "server", config=root / "nats.conf") as server:
        yield server.url


async def _agent(url: str, repo_root: Path, tools: list[ToolDescriptor]) -> AsyncIterator[ToolClient]:
    """The policy's listing handlers over ``tools`` on ``url``, and agent ``a1``'s client."""
    text = (repo_root / "deploy/policy/policy.cedar").read_text(encoding="utf-8")
    ports = PolicyPorts(
        policy=PolicyHolder(PolicyEngine(text, PrincipalDirectory.from_toml(DIRECTORY))),
        descriptors=InMemoryDescriptorSource(tools),
        limiter=InMemoryRateLimiter(),
        replays=InMemoryReplayIndex(),
        clock=lambda: datetime.now(UTC),
        max_request_bytes=4096,
    )
    runtime: Any = SimpleNamespace(ports=ports)  # the listing handlers read only the ports
    broker = NatsBroker(url)
    broker.include_router(build_router(lambda: runtime, lambda: datetime.now(UTC)))
    await broker.start()
    client = ToolClient(await nats.connect(url), "a1", ReceiptVerifier(None))
    yield client
    await client.close()
    await broker.stop()


async def test_an_agent_lists_four_hundred_tools_that_do_not_fit_one_message(nats_url: str, repo_root: Path) -> None:
    tools = [_tool(f"many_{i:04d}", [100, 12_000][i % 2], SideEffectClass.READ_ONLY) for i in range(400)]
    tools += [_tool(f"hidden_{i:02d}", 100, SideEffectClass.FINANCIAL) for i in range(5)]  # a1 may not call these
    async for client in _agent(nats_url, repo_root, tools):
        listed = await client.list_tools()
        assert [d.name for d in listed] == [f"many_{i:04d}" for i in range(400)]
        first = await client.list_tools_page()
        assert first.next is not None and len(first.descriptors or []) < 400


async def test_on_a_64_kib_server_a_tool_too_large_for_a_page_is_looked_up_or_named(
    small_nats: str, repo_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tools = [_tool("a_small", 100), _tool("b_page_too_small", 63_800), _tool("c_fits_nothing", 70_000)]
    tools += [_tool(f"d_{i:03d}", 3_000) for i in range(60)]
    async for client in _agent(small_nats, repo_root, tools):
        with caplog.at_level(logging.WARNING, logger="effectgate.sdk"):
            listed = [d.name for d in await client.list_tools()]
        assert listed == ["a_small", "b_page_too_small", *[f"d_{i:03d}" for i in range(60)]]
        assert "c_fits_nothing" in caplog.text and "too large to list" in caplog.text
        summarised: list[str] = []
        after = None
        while True:
            page = await client.list_tools_page(after)
            summarised += [s.name for s in page.summaries or []]
            if (after := page.next) is None:
                break
        assert summarised == ["b_page_too_small", "c_fits_nothing"]
