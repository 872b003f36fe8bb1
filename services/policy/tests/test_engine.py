"""Unit tests of the Cedar decision core and the principal directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectgate.contracts.directory import DirectoryInvalid, PrincipalDirectory
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.cedar.engine import PolicyEngine, PolicyOutcome
from effectgate.policy.cedar.loading import load_policy
from effectgate.policy.errors import PolicyInvalid


def decide_op(
    engine: PolicyEngine, principal: str, tool: str, version: str, operation: str, spec: OperationSpec
) -> PolicyOutcome:
    """Decide a call of a one-operation descriptor ``tool@version`` with no arguments."""
    descriptor = ToolDescriptor(name=tool, version=version, adapter="file_system", operations={operation: spec})
    return engine.decide(principal, descriptor, operation, {})


DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "policy"
POLICY, PRINCIPALS = DEPLOY / "policy.cedar", DEPLOY / "principals.toml"

DIRECTORY_TOML = """
[principals.a0]
autonomy = 0
[principals.a1]
autonomy = 1
roles = ["agent"]
[principals.a2]
autonomy = 2
[principals.a3]
autonomy = 3
[approvers.alice]
roles = ["operator"]
[approvers.bob]
roles = ["operator", "sre"]
[approvers.carol]
roles = ["finance", "security"]
[approvers.dave]
roles = ["finance", "security"]
"""

E, A, D = Verdict.EXECUTE, Verdict.NEEDS_APPROVAL, Verdict.DENY
SE = SideEffectClass


def spec(side_effect: SideEffectClass, risk: RiskTier = RiskTier.LOW) -> OperationSpec:
    return OperationSpec(input_schema={}, output_schema={}, side_effect_class=side_effect, risk_tier=risk)


def engine(policy_text: str, directory_text: str = DIRECTORY_TOML) -> PolicyEngine:
    return PolicyEngine(policy_text, PrincipalDirectory.from_toml(directory_text))


@pytest.fixture(scope="module")
def default() -> PolicyEngine:
    """The shipped policy over a directory holding one agent per autonomy level."""
    return engine(POLICY.read_text(encoding="utf-8"))


# --- default deny ---------------------------------------------------------------------------


def test_empty_policy_denies_everything_with_no_permit() -> None:
    outcome = decide_op(engine(""), "a3", "fs", "1.0.0", "read", spec(SE.READ_ONLY, RiskTier.TRIVIAL))
    assert (outcome.verdict, outcome.reason_code, outcome.policy_ids) == (D, "no_permit", ())
    assert outcome.reason.startswith("default deny: no policy permits 'a3' to call fs@1.0.0 read")


def test_unknown_principal_is_denied_before_cedar(default: PolicyEngine) -> None:
    outcome = decide_op(default, "mallory", "fs", "1.0.0", "read", spec(SE.READ_ONLY))
    assert (outcome.verdict, outcome.reason_code) == (D, "unknown_principal")
    assert "mallory" in outcome.reason


# --- the shipped policy: side-effect class x autonomy ----------------------------------------

LOW, MEDIUM, HIGH, CRITICAL = RiskTier.LOW, RiskTier.MEDIUM, RiskTier.HIGH, RiskTier.CRITICAL
# side effect, risk -> expected (verdict, approver role) for autonomy 0, 1, 2, 3
MATRIX = [
    (SE.READ_ONLY, RiskTier.TRIVIAL, [(D, None), (E, None), (E, None), (E, None)]),
    (SE.READ_ONLY, LOW, [(D, None), (E, None), (E, None), (E, None)]),
    (SE.READ_ONLY, MEDIUM, [(D, None), (D, None), (D, None), (D, None)]),
    (SE.REVERSIBLE_WRITE, LOW, [(D, None), (A, "operator"), (E, None), (E, None)]),
    (SE.REVERSIBLE_WRITE, MEDIUM, [(D, None), (A, "operator"), (E, None), (E, None)]),
    (SE.REVERSIBLE_WRITE, HIGH, [(D, None), (A, "operator"), (A, "operator"), (A, "operator")]),
    (SE.IRREVERSIBLE_WRITE, LOW, [(D, None), (D, None), (A, "operator"), (A, "operator")]),
    (SE.PRODUCTION, MEDIUM, [(D, None), (A, "sre"), (A, "sre"), (A, "sre")]),
    (SE.FINANCIAL, LOW, [(D, None), (D, None), (D, None), (D, None)]),  # no amount to judge: no permit
    (SE.SECURITY_SENSITIVE, LOW, [(D, None), (A, "security"), (A, "security"), (A, "security")]),
]


@pytest.mark.parametrize(("side_effect", "risk", "expected"), MATRIX)
def test_default_policy_matrix(
    default: PolicyEngine,
    side_effect: SideEffectClass,
    risk: RiskTier,
    expected: list[tuple[Verdict, str | None]],
) -> None:
    got = [decide_op(default, f"a{level}", "fs", "1.0.0", "op", spec(side_effect, risk)) for level in range(4)]
    assert [(o.verdict, o.approver_role) for o in got] == expected


def test_financial_without_an_amount_has_no_permit_in_the_shipped_policy(default: PolicyEngine) -> None:
    outcome = decide_op(default, "a3", "pay", "1.0.0", "refund", spec(SE.FINANCIAL))
    assert (outcome.verdict, outcome.reason_code) == (D, "no_permit")


@pytest.mark.parametrize("side_effect", [SE.READ_ONLY, SE.REVERSIBLE_WRITE, SE.PRODUCTION])
def test_critical_risk_is_forbidden_below_autonomy_3(default: PolicyEngine, side_effect: SideEffectClass) -> None:
    outcome = decide_op(default, "a2", "fs", "1.0.0", "op", spec(side_effect, CRITICAL))
    assert (outcome.verdict, outcome.reason_code) == (D, "forbidden")
    assert outcome.policy_ids == ("forbid-critical-risk-below-autonomy-3",)


def test_outcomes_name_the_determining_policies(default: PolicyEngine) -> None:
    execute = decide_op(default, "a1", "fs", "1.0.0", "read", spec(SE.READ_ONLY))
    approval = decide_op(default, "a1", "fs", "1.0.0", "write", spec(SE.REVERSIBLE_WRITE))
    assert (execute.reason_code, execute.policy_ids) == ("permitted", ("read-only-low-risk",))
    assert "read-only-low-risk" in execute.reason
    assert (approval.reason_code, approval.policy_ids) == (
        "approval_required",
        ("reversible-write-approval",),
    )


def test_shipped_files_load_with_the_shipped_principals() -> None:
    loaded = load_policy(POLICY, PRINCIPALS)
    autonomy = {name: p.autonomy for name, p in loaded.directory.principals.items()}
    assert autonomy == {"demo-agent": 1, "bench-agent": 1, "ops-agent": 2}
    assert decide_op(loaded, "demo-agent", "fs", "1.0.0", "read", spec(SE.READ_ONLY)).verdict is E
    assert decide_op(loaded, "ops-agent", "fs", "1.0.0", "write", spec(SE.REVERSIBLE_WRITE)).verdict is E
    assert loaded.directory.is_approver("bob", "sre") and not loaded.directory.is_approver("alice", "sre")


# --- Cedar semantics through the engine ------------------------------------------------------

PERMIT_ALL = '@id("allow-all") permit (principal, action == Action::"execute", resource);\n'
ASK = 'permit (principal, action == Action::"execute_with_approval", resource);'


def test_forbid_wins_over_permit() -> None:
    forbid = '@id("no-writes") @reason("writes are off today") forbid (principal, action, resource)'
    forbid += ' when { context.side_effect != "READ_ONLY" };'
    decider = engine(PERMIT_ALL + forbid)
    assert decide_op(decider, "a1", "fs", "1.0.0", "read", spec(SE.READ_ONLY)).verdict is E
    outcome = decide_op(decider, "a1", "fs", "1.0.0", "write", spec(SE.REVERSIBLE_WRITE))
    assert (outcome.verdict, outcome.reason_code, outcome.reason) == (D, "forbidden", "writes are off today")
    assert outcome.policy_ids == ("no-writes",)


def test_forbid_without_reason_annotation_is_named_by_its_id() -> None:
    decider = engine(PERMIT_ALL + '@id("closed") forbid (principal, action, resource);')
    outcome = decide_op(decider, "a1", "fs", "1.0.0", "read", spec(SE.READ_ONLY))
    assert (outcome.reason_code, outcome.reason) == ("forbidden", "forbidden by policy closed")


def test_approver_role_comes_from_the_determining_policy() -> None:
    approval = '@id("ask") @approver_role("treasurer") ' + ASK
    treasurer = DIRECTORY_TOML + '[approvers.erin]\nroles = ["treasurer"]\n'
    outcome = decide_op(engine(approval, treasurer), "a1", "pay", "2.0.0", "refund", spec(SE.FINANCIAL))
    assert (outcome.verdict, outcome.approver_role, outcome.policy_ids) == (A, "treasurer", ("ask",))


def test_approval_permit_without_approver_role_is_refused_at_load() -> None:
    with pytest.raises(PolicyInvalid, match=r"policy 'ask': a permit of Action::\"execute_with_approval\" needs"):
        engine('@id("ask") ' + ASK)


def test_a_permit_of_every_action_without_a_role_still_fails_closed_when_it_asks_for_approval() -> None:
    every = '@id("ask") permit (principal, action, resource) when { context.side_effect == "FINANCIAL" };'
    outcome = decide_op(engine(every), "a1", "pay", "2.0.0", "refund", spec(SE.FINANCIAL))
    assert (outcome.verdict, outcome.reason_code) == (E, "permitted"), "execute is asked first"


def test_conflicting_approver_roles_fail_closed() -> None:
    text = "".join(f'@id("{role}") @approver_role("{role}") {ASK}' for role in ("operator", "sre"))
    outcome = decide_op(engine(text), "a1", "fs", "1.0.0", "op", spec(SE.PRODUCTION))
    assert (outcome.verdict, outcome.reason_code) == (D, "policy_invalid")


def test_execute_wins_over_approval_when_both_permit() -> None:
    approval = '@id("ask") @approver_role("operator") permit (principal, action, resource);'
    outcome = decide_op(engine(PERMIT_ALL + approval), "a1", "fs", "1.0.0", "op", spec(SE.READ_ONLY))
    assert (outcome.verdict, outcome.policy_ids) == (E, ("allow-all", "ask"))


def test_evaluation_error_denies_even_when_another_policy_permits() -> None:
    overflow = '@id("overflow") forbid (principal, action, resource)'
    overflow += " when { principal.autonomy + 9223372036854775807 < 0 };"
    outcome = decide_op(engine(PERMIT_ALL + overflow), "a1", "fs", "1.0.0", "read", spec(SE.READ_ONLY))
    assert (outcome.verdict, outcome.reason_code, outcome.policy_ids) == (D, "policy_error", ("overflow",))
    assert "overflow" in outcome.reason and "policy1" not in outcome.reason


def test_principal_roles_are_visible_to_policies() -> None:
    text = '@id("agents") permit (principal, action == Action::"execute", resource)'
    text += ' when { principal.roles.contains("agent") };'
    decider = engine(text)
    assert decide_op(decider, "a1", "fs", "1.0.0", "op", spec(SE.READ_ONLY)).verdict is E
    assert decide_op(decider, "a3", "fs", "1.0.0", "op", spec(SE.READ_ONLY)).verdict is D


# --- invalid policies and files --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("permit (principal, action, resource", "does not parse"),
        ('@id("x") permit (principal, action, resource) when { context.amount > 3 };', "`x`"),
        (
            '@id("x") permit (principal, action, resource) when { principal.autonomy == "high" };',
            "validation",
        ),
        ('@id("x") permit (principal is User, action, resource);', "validation"),
        ("permit (principal, action, resource);", "no @id"),
        (
            '@id("x") permit (principal, action, resource);\n@id("x") forbid (principal, action, resource);',
            "used by",
        ),
        ('@id("t") permit (principal == ?principal, action, resource);', "templates"),
    ],
)
def test_invalid_policy_text_is_refused(text: str, fragment: str) -> None:
    with pytest.raises(PolicyInvalid) as caught:
        engine(text)
    assert caught.value.reason_code == "policy_invalid"
    assert fragment in caught.value.reason


@pytest.mark.parametrize(
    "text",
    [
        "[principals.x]\nroles = []\n",  # autonomy missing
        "[principals.x]\nautonomy = 4\n",
        "[principals.x]\nautonomy = true\n",
        "[principals.x]\nautonomy = 1\nautonmy = 3\n",
        "[approvers.x]\nroles = [1]\n",
        "[principal.x]\nautonomy = 1\n",
        "principals = 3\n",
        "not toml [",
    ],
)
def test_invalid_directory_is_refused(text: str) -> None:
    with pytest.raises(DirectoryInvalid):
        PrincipalDirectory.from_toml(text)


def test_is_approver_checks_the_role() -> None:
    directory = PrincipalDirectory.from_toml(DIRECTORY_TOML)
    assert directory.is_approver("alice", "operator")
    assert not directory.is_approver("alice", "sre")
    assert not directory.is_approver("a1", "agent")  # principals are not approvers
    assert not directory.is_approver("nobody", "operator")


def test_missing_policy_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PolicyInvalid) as caught:
        load_policy(tmp_path / "absent.cedar", PRINCIPALS)
    assert caught.value.path == str(tmp_path / "absent.cedar")


def test_missing_directory_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PolicyInvalid) as caught:
        load_policy(POLICY, tmp_path / "absent.toml")
    assert caught.value.path == str(tmp_path / "absent.toml")


def test_invalid_files_are_refused_naming_the_file(tmp_path: Path) -> None:
    bad_policy, bad_directory = tmp_path / "bad.cedar", tmp_path / "bad.toml"
    bad_policy.write_text('@id("x") permit (principal, action, resource) when { context.nope };')
    bad_directory.write_text("[principals.x]\nautonomy = 9\n")
    with pytest.raises(PolicyInvalid, match="bad.cedar") as policy_error:
        load_policy(bad_policy, PRINCIPALS)
    with pytest.raises(PolicyInvalid, match="bad.toml") as directory_error:
        load_policy(POLICY, bad_directory)
    assert policy_error.value.path == str(bad_policy)
    assert directory_error.value.path == str(bad_directory)
