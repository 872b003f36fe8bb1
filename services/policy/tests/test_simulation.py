"""Replaying recorded decisions through a candidate policy, and explaining one, over decisions the pipeline made."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import ToolRequested, encode
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.attributes import Attributes
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.service import Envelope, PolicyPorts
from effectgate.policy.what_if.explain import explain
from effectgate.policy.what_if.simulation import Report, cases_from, replay, wanted

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
READS = """@id("reads") @reason("reads run")
permit (principal, action == Action::"execute", resource)
when { context.side_effect == "READ_ONLY" && context.args has path };"""
EVERYTHING_APPROVED = """@id("all-approved") @approver_role("operator")
permit (principal, action == Action::"execute_with_approval", resource);"""


@pytest.fixture
def file_system(repo_root: Path) -> ToolDescriptor:
    return msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes(), type=ToolDescriptor)


@pytest.fixture
def build(repo_root: Path, file_system: ToolDescriptor) -> Any:
    directory = PrincipalDirectory.from_toml((repo_root / "deploy/policy/principals.toml").read_text())
    return lambda text: build_engine(text, directory, Attributes(), [file_system])


async def _record(engine: PolicyEngine, file_system: ToolDescriptor, calls: list[tuple[str, dict[str, Any]]]) -> list:
    """The audit records (request, then decision) of ``calls`` decided under ``engine``, as the export gives them."""
    ports = PolicyPorts(
        PolicyHolder(engine),
        InMemoryDescriptorSource([file_system]),
        InMemoryRateLimiter(),
        InMemoryReplayIndex(),
        lambda: NOW,
        65536,
    )
    records: list[dict[str, Any]] = []
    for number, (operation, arguments) in enumerate(calls):
        rid = f"r{number}"
        request = ToolRequested(
            event_id=rid,
            occurred_at=NOW,
            request_id=rid,
            tool="file_system",
            operation=operation,
            arguments=arguments,
            idempotency_key=rid,
        )
        decision = await decide(Envelope("demo-agent", encode(request), rid), ports)
        records.append({"event_type": "tool.requested", "principal": "demo-agent", "payload": encode(request).decode()})
        records.append({"event_type": "decision.made", "principal": "demo-agent", "payload": encode(decision).decode()})
    return records


CALLS = [
    ("read", {"path": "a.txt"}),
    ("list", {"path": "."}),
    ("write", {"path": "a.txt", "content": "x"}),  # hidden under READS: no permit could hold
    ("read", {"path": 5}),  # schema_invalid: never reached the policy
]


async def test_the_unchanged_policy_changes_nothing_and_a_changed_one_names_each_change(
    build: Any, file_system: ToolDescriptor
) -> None:
    live = build(READS)
    records = await _record(live, file_system, CALLS)
    descriptors = {wanted_: file_system for wanted_ in [("file_system", file_system.version), ("file_system", None)]}

    same = Report()
    replay(live, cases_from(records, NOW - timedelta(hours=1), same), descriptors, same)
    assert (same.compared, same.changes) == (3, [])
    assert same.not_comparable == {"never reached the policy (schema_invalid)": 1}

    changed = Report()
    cases = cases_from(records, NOW - timedelta(hours=1), changed)
    # the hidden write named no version
    assert wanted(cases) == {("file_system", file_system.version), ("file_system", None)}
    replay(build(EVERYTHING_APPROVED), cases, descriptors, changed)
    moved = {(c.case.request_id, c.case.before, c.after, c.after_code) for c in changed.changes}
    assert moved == {
        ("r0", Verdict.EXECUTE, Verdict.NEEDS_APPROVAL, "approval_required"),
        ("r1", Verdict.EXECUTE, Verdict.NEEDS_APPROVAL, "approval_required"),
        ("r2", Verdict.DENY, Verdict.NEEDS_APPROVAL, "approval_required"),
    }


async def test_decisions_outside_the_window_are_not_replayed(build: Any, file_system: ToolDescriptor) -> None:
    records = await _record(build(READS), file_system, CALLS)
    report = Report()
    assert cases_from(records, NOW + timedelta(seconds=1), report) == [] and not report.not_comparable


async def test_a_tool_the_registry_no_longer_has_is_not_comparable(build: Any, file_system: ToolDescriptor) -> None:
    records = await _record(build(READS), file_system, CALLS[:1])
    report = Report()
    replay(build(READS), cases_from(records, NOW, report), {}, report)
    assert report.compared == 0 and report.not_comparable == {
        "the tool, version or operation is no longer registered": 1
    }


def test_explain_names_the_determining_policy_its_source_and_the_context(
    build: Any, file_system: ToolDescriptor
) -> None:
    explained = explain(build(READS), "demo-agent", file_system, "read", {"path": "a.txt"})

    assert (explained.verdict, explained.hidden) == (Verdict.EXECUTE, False)
    assert explained.context is not None and explained.context["args"] == {"path": "a.txt"}
    execute, approval = explained.answers
    assert execute.allowed and [view.id for view in execute.determining] == ["reads"]
    view = execute.determining[0]
    assert view.effect == "permit" and view.annotations["reason"] == "reads run"
    assert 'context.side_effect == "READ_ONLY"' in view.source and view.source.startswith("@id")
    assert not approval.allowed and approval.determining == ()


def test_explain_says_when_a_call_is_hidden(build: Any, file_system: ToolDescriptor) -> None:
    explained = explain(build(READS), "demo-agent", file_system, "write", {"path": "a.txt", "content": "x"})
    assert (explained.verdict, explained.hidden, explained.outcome.reason_code) == (Verdict.DENY, True, "no_permit")
