"""``@approvals_required``: checked at load, the largest applying quorum counts, carried by the decision."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import ToolRequested, encode, request_identity
from effectgate.contracts.rpc.recheck import RecheckQuery
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.cedar.engine import PolicyEngine, PolicyOutcome
from effectgate.policy.cedar.loading import load_policy
from effectgate.policy.errors import PolicyInvalid
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.pipeline.recheck import recheck
from effectgate.policy.service import Envelope, PolicyPorts


def decide_op(
    engine: PolicyEngine, principal: str, tool: str, version: str, operation: str, spec: OperationSpec
) -> PolicyOutcome:
    """Decide a call of a one-operation descriptor ``tool@version`` with no arguments."""
    descriptor = ToolDescriptor(name=tool, version=version, adapter="file_system", operations={operation: spec})
    return engine.decide(principal, descriptor, operation, {})


NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
DIRECTORY = """
[principals.a1]
autonomy = 1
operator = "alice"
[approvers.alice]
roles = ["operator"]
[approvers.bob]
roles = ["operator"]
"""
ASK = 'permit (principal, action == Action::"execute_with_approval", resource)'
WRITES = ' when { context.side_effect == "REVERSIBLE_WRITE" };'


OPERATORS = "".join(f'[approvers.op{n}]\nroles = ["operator"]\n' for n in range(7))
"""Seven more operators: a quorum above the approvers who hold its role does not load."""


def _engine(policy_text: str, directory: str = DIRECTORY) -> PolicyEngine:
    return PolicyEngine(policy_text, PrincipalDirectory.from_toml(directory))


def _write() -> OperationSpec:
    return OperationSpec(
        input_schema={}, output_schema={}, side_effect_class=SideEffectClass.REVERSIBLE_WRITE, risk_tier=RiskTier.LOW
    )


def test_the_quorum_is_the_largest_any_applying_approval_permit_asks_for() -> None:
    text = '@id("one") @approver_role("operator") ' + ASK + ";"
    text += '@id("two") @approver_role("operator") @approvals_required("2") ' + ASK + WRITES
    text += (
        '@id("three") @approver_role("operator") @approvals_required("3") '
        + ASK
        + ' when { context.side_effect == "PRODUCTION" };'
    )
    outcome = decide_op(_engine(text, DIRECTORY + OPERATORS), "a1", "fs", "1.0.0", "write", _write())
    assert (outcome.verdict, outcome.approvals_required, outcome.policy_ids) == (
        Verdict.NEEDS_APPROVAL,
        2,
        ("one", "two"),
    )
    assert "2 approvers with role 'operator'" in outcome.reason
    reads = OperationSpec(
        input_schema={}, output_schema={}, side_effect_class=SideEffectClass.READ_ONLY, risk_tier=RiskTier.LOW
    )
    assert decide_op(_engine(text, DIRECTORY + OPERATORS), "a1", "fs", "1.0.0", "read", reads).approvals_required == 1


def test_the_shipped_policy_asks_one_approver() -> None:
    repo = Path(__file__).resolve().parents[3] / "deploy/policy"
    engine = load_policy(repo / "policy.cedar", repo / "principals.toml")
    outcome = decide_op(engine, "demo-agent", "fs", "1.0.0", "write", _write())
    assert (outcome.verdict, outcome.approvals_required) == (Verdict.NEEDS_APPROVAL, 1)


@pytest.mark.parametrize(
    ("annotation", "policy", "fragment"),
    [
        ('"0"', ASK, "policy 'q': @approvals_required must be an integer 1..9, got '0'"),
        ('"10"', ASK, "must be an integer 1..9, got '10'"),
        ('"two"', ASK, "must be an integer 1..9, got 'two'"),
        ('"2.0"', ASK, "must be an integer 1..9, got '2.0'"),
        ('" 2"', ASK, "must be an integer 1..9, got ' 2'"),
        ('"-1"', ASK, "must be an integer 1..9, got '-1'"),
        ('""', ASK, "must be an integer 1..9, got ''"),
        (
            '"2"',
            'permit (principal, action == Action::"execute", resource)',
            "policy 'q': @approvals_required applies only to a permit of Action::\"execute_with_approval\"",
        ),
        ('"2"', "forbid (principal, action, resource)", "applies only to a permit"),
    ],
)
def test_an_invalid_quorum_is_refused_at_load_naming_the_policy(annotation: str, policy: str, fragment: str) -> None:
    text = f'@id("q") @approver_role("operator") @approvals_required({annotation}) {policy};'
    with pytest.raises(PolicyInvalid) as refused:
        _engine(text)
    assert fragment in refused.value.reason


def test_a_quorum_on_a_permit_of_both_actions_is_accepted() -> None:
    both = 'permit (principal, action in [Action::"execute", Action::"execute_with_approval"], resource)'
    text = f'@id("q") @approver_role("operator") @approvals_required("9") {both};'
    assert _engine(text, DIRECTORY + OPERATORS).policy_ids == ("q",)


@pytest.fixture
def ports(repo_root: Path) -> PolicyPorts:
    descriptor = msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes(), type=ToolDescriptor)
    text = f'@id("two-operators") @approver_role("operator") @approvals_required("2") {ASK}{WRITES}'
    return PolicyPorts(
        policy=PolicyHolder(_engine(text)),
        descriptors=InMemoryDescriptorSource([descriptor]),
        limiter=InMemoryRateLimiter(),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=4096,
    )


async def test_a_decision_carries_the_quorum_the_asking_policy_and_the_risk_tier(ports: PolicyPorts) -> None:
    request = ToolRequested(
        event_id="r1",
        occurred_at=NOW,
        request_id="r1",
        tool="file_system",
        operation="write",
        arguments={"path": "a.txt", "content": "x"},
        idempotency_key="k1",
    )
    data = encode(request)
    decision = await decide(Envelope("a1", data, request_identity(data, None, 1)), ports)
    assert (decision.verdict, decision.approvals_required, decision.policy_id) == (
        Verdict.NEEDS_APPROVAL,
        2,
        "two-operators",
    )
    assert decision.risk_tier is RiskTier.MEDIUM and decision.approver_role == "operator"
    assert decision.request is not None and decision.request_hash is not None
    query = RecheckQuery(principal="a1", request=decision.request, request_hash=decision.request_hash)
    bob = await recheck(msgspec.structs.replace(query, approver="bob"), ports, lambda: NOW)
    alice = await recheck(msgspec.structs.replace(query, approver="alice"), ports, lambda: NOW)
    assert bob.allowed and (alice.allowed, alice.reason_code) == (False, "approver_not_entitled")  # a1's operator


def test_a_policy_file_with_an_invalid_quorum_does_not_load(tmp_path: Path, repo_root: Path) -> None:
    """The service then holds no policy (not ready, every request denied), and says which policy is wrong."""
    shipped = (repo_root / "deploy/policy/policy.cedar").read_text()
    bad = tmp_path / "policy.cedar"
    bad.write_text(shipped + f'\n@id("three-people") @approver_role("operator") @approvals_required("three") {ASK};\n')
    with pytest.raises(PolicyInvalid) as refused:
        load_policy(bad, repo_root / "deploy/policy/principals.toml")
    assert refused.value.path == str(bad)
    assert refused.value.reason == (
        f"{bad}: policy 'three-people': @approvals_required must be an integer 1..9, got 'three'"
    )
