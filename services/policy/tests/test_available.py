"""A stored descriptor whose references dangle (published before they were checked) is unavailable: fail closed."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest
from redis.asyncio import Redis

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import ToolRequested, encode
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.app import _ports
from effectgate.policy.cedar.attributes import Attributes
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.handlers.listings import get_for
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.available import AvailableDescriptors
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.in_force.tool_listing import list_for
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.service import Envelope, PolicyPorts
from effectgate.policy.settings import PolicySettings

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
DIRECTORY = '[principals.a1]\nautonomy = 1\n[approvers.ops]\nroles = ["operator", "sre", "finance", "security"]\n'
DIRECTORY += '[approvers.two]\nroles = ["finance", "security"]\n'
SCHEMA = {"type": "object", "properties": {"memo": {"type": "string"}, "sum": {"type": "number"}}}


def _tool(name: str, adapter: str = "file_system", **pointers: str) -> ToolDescriptor:
    spec = OperationSpec(
        input_schema=SCHEMA,
        output_schema={},
        side_effect_class=SideEffectClass.READ_ONLY,
        risk_tier=RiskTier.LOW,
        **pointers,  # type: ignore[arg-type]
    )
    return ToolDescriptor(name=name, version="1.0.0", adapter=adapter, operations={"log": spec})


GOOD = _tool("git")
DANGLING = [
    _tool("py", "python:mod.fn"),
    _tool("web", "mcp:web", destination="/sum"),
    _tool("bank", "mcp:bank", amount="/memo"),
    _tool("shop", cost="/absent"),
]


@pytest.fixture
def ports(repo_root: Path) -> PolicyPorts:
    text = (repo_root / "deploy/policy/policy.cedar").read_text(encoding="utf-8")
    stored = [GOOD, *DANGLING]
    engine = build_engine(text, PrincipalDirectory.from_toml(DIRECTORY), Attributes(), stored)
    return PolicyPorts(
        policy=PolicyHolder(engine),
        descriptors=AvailableDescriptors(InMemoryDescriptorSource(stored)),
        limiter=InMemoryRateLimiter(),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=4096,
    )


def _call(tool: str) -> Envelope:
    request = ToolRequested(
        event_id="r1", occurred_at=NOW, request_id="r1", tool=tool, operation="log", arguments={}, idempotency_key="k1"
    )
    return Envelope("a1", encode(request), "r1")


async def test_only_descriptors_whose_references_exist_are_listed(ports: PolicyPorts) -> None:
    reply = await list_for("a1", ports)

    assert [d.name for d in reply.descriptors or []] == ["git"]


@pytest.mark.parametrize("tool", [d.name for d in DANGLING])
async def test_a_dangling_descriptor_is_called_and_looked_up_like_a_missing_tool(
    ports: PolicyPorts, tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, "effectgate.policy")
    denied, missing = await decide(_call(tool), ports), await decide(_call("nothing"), ports)

    assert (denied.verdict, denied.reason_code) == (Verdict.DENY, "unknown_tool")
    assert denied.reason == missing.reason.replace("nothing", tool)
    looked_up = await get_for("a1", f'{{"tool": "{tool}"}}'.encode(), ports)
    assert (looked_up.ok, looked_up.reason_code) == (False, "unknown_tool")
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith(f"tool {tool}@1.0.0 is unavailable to every agent (invalid_"), said


async def test_the_available_tool_still_runs(ports: PolicyPorts) -> None:
    assert (await decide(_call("git"), ports)).verdict is Verdict.EXECUTE


async def test_the_service_reads_descriptors_through_the_check() -> None:
    wired = _ports(
        PolicySettings(), Redis(), PolicyHolder(), InMemoryDescriptorSource([GOOD, *DANGLING]), datetime.now, None
    )  # type: ignore[arg-type]

    assert [d.name for d in await wired.descriptors.list()] == ["git"]
