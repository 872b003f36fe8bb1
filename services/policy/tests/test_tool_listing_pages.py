"""The agent's tool listing in pages: each page fits one message, every visible tool is listed once.

Generated registries (many tools, descriptions of mixed sizes, tools a principal may not
see) are listed at several ``max_payload`` values and page sizes, and compared with the
listing read in one piece; a tool too large for a page alone is listed as a summary.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import msgspec
import pytest

from effectgate.contracts.bus.paging import PageQuery
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.tools.descriptors import OperationSpec, RateLimit, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.handlers.listings import list_page
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.in_force.tool_listing import list_for
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.service import PolicyPorts
from effectgate.shared.consumer.paging import HEADROOM_BYTES

DIRECTORY = (
    '[principals.a1]\nautonomy = 1\n[approvers.alice]\nroles = ["operator", "sre", "finance", "security"]\n'
    '[approvers.bob]\nroles = ["finance", "security"]\n'
)
SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": False}
HUGE = 1 << 30


def _tool(name: str, description: str, side_effect: SideEffectClass) -> ToolDescriptor:
    operation = OperationSpec(
        input_schema=SCHEMA, output_schema={}, side_effect_class=side_effect, risk_tier=RiskTier.LOW
    )
    return ToolDescriptor(
        name=name,
        version="1.0.0",
        adapter="file_system",
        operations={"run": operation},
        rate_limit=RateLimit(calls=5, period_s=60),
        description=description,
    )


def _ports(repo_root: object, tools: list[ToolDescriptor]) -> PolicyPorts:
    from pathlib import Path

    text = (Path(str(repo_root)) / "deploy/policy/policy.cedar").read_text(encoding="utf-8")
    return PolicyPorts(
        policy=PolicyHolder(PolicyEngine(text, PrincipalDirectory.from_toml(DIRECTORY))),
        descriptors=InMemoryDescriptorSource(tools),
        limiter=InMemoryRateLimiter(),
        replays=InMemoryReplayIndex(),
        clock=lambda: datetime(2026, 11, 29, tzinfo=UTC),
        max_request_bytes=4096,
    )


def _registry(seed: int, count: int) -> list[ToolDescriptor]:
    chance = random.Random(seed)
    classes = [SideEffectClass.READ_ONLY, SideEffectClass.REVERSIBLE_WRITE, SideEffectClass.FINANCIAL]
    sizes = [0, 200, 3_000, 12_000]
    return [_tool(f"t{seed}_{index:04d}", "d" * chance.choice(sizes), chance.choice(classes)) for index in range(count)]


async def _pages(principal: str, ports: PolicyPorts, max_payload: int, limit: int) -> list[object]:
    pages, after = [], None
    for _ in range(2000):
        reply = await list_for(principal, ports, PageQuery(after=after, limit=limit), max_payload)
        assert reply.ok, reply
        pages.append(reply)
        if reply.next is None:
            return pages
        after = reply.next
    raise AssertionError("the listing did not end")


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(("max_payload", "limit"), [(65_536, 100), (16_384, 7), (1_048_576, 1000)])
async def test_pages_fit_and_together_list_every_visible_tool_once(
    repo_root: object, seed: int, max_payload: int, limit: int
) -> None:
    ports = _ports(repo_root, _registry(seed, 400))
    whole = await list_for("a1", ports, PageQuery(limit=1000), HUGE)
    expected = [d.name for d in whole.descriptors or []]
    assert 0 < len(expected) < 400  # some tools are hidden from a1
    pages = await _pages("a1", ports, max_payload, limit)
    listed = [d.name for p in pages for d in p.descriptors or []]  # type: ignore[attr-defined]
    summarised = [s.name for p in pages for s in p.summaries or []]  # type: ignore[attr-defined]
    assert sorted(listed + summarised) == expected and len(set(listed + summarised)) == len(expected)
    assert all(len(msgspec.json.encode(p)) <= max_payload - HEADROOM_BYTES for p in pages)


async def test_a_tool_too_large_for_a_page_alone_is_summarised_with_its_operations(repo_root: object) -> None:
    tools = [_tool("a_small", "s", SideEffectClass.READ_ONLY), _tool("b_huge", "h" * 40_000, SideEffectClass.READ_ONLY)]
    pages = await _pages("a1", _ports(repo_root, tools), 16_384, 100)
    [summary] = [s for p in pages for s in p.summaries or []]  # type: ignore[attr-defined]
    assert (summary.name, summary.operations, len(summary.description)) == ("b_huge", ("run",), 200)
    assert summary.size_bytes > 40_000
    assert [d.name for p in pages for d in p.descriptors or []] == ["a_small"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"after": "not a tool!"}', "malformed"),
        (b'{"limit": -1}', "malformed"),
        (b'{"tool": "x"}', "malformed"),
        (b"{" * 2000, "oversized"),
    ],
)
async def test_a_bad_page_query_is_refused_naming_why(repo_root: object, body: bytes, code: str) -> None:
    reply = await list_page("a1", body, _ports(repo_root, _registry(1, 3)), 65_536)
    assert (reply.ok, reply.reason_code) == (False, code)


async def test_an_empty_body_is_the_first_page(repo_root: object) -> None:
    ports = _ports(repo_root, _registry(4, 150))
    first = await list_page("a1", b"", ports, 1_048_576)
    assert first.ok and len(first.descriptors or []) == 100 and first.next is not None


async def test_the_next_page_starts_after_the_last_tool_of_this_one(repo_root: object) -> None:
    ports = _ports(repo_root, [_tool(f"t_{i:02d}", "", SideEffectClass.READ_ONLY) for i in range(5)])
    first = await list_for("a1", ports, PageQuery(limit=2), HUGE)
    second = await list_for("a1", ports, PageQuery(after=first.next, limit=2), HUGE)
    assert [d.name for d in first.descriptors or []] == ["t_00", "t_01"] and first.next == "t_01"
    assert [d.name for d in second.descriptors or []] == ["t_02", "t_03"] and second.next == "t_03"
