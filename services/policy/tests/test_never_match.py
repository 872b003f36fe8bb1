"""Policies that could never match are refused at load, naming the policy and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.loading import load_policy
from effectgate.policy.errors import PolicyInvalid

DIRECTORY = PrincipalDirectory.from_toml("[principals.a1]\nautonomy = 1\n")
HEAD = 'permit (principal is Agent, action == Action::"execute", resource is Tool)'


def load(text: str) -> PolicyEngine:
    return PolicyEngine(text, DIRECTORY)


@pytest.mark.parametrize(
    ("condition", "field"),
    [
        ('context has arguments && context.arguments.path like "*secret*"', "context.arguments"),
        ('principal has department && principal.department == "payments"', "principal.department"),
        ('resource has owner && resource.owner == "me"', "resource.owner"),
        ("context has tool && context has approved_by", "context.approved_by"),
        ("principal.autonomy >= 1 || principal has clearance", "principal.clearance"),
        ('context has arguments.path && context.operation == "read"', "context.arguments.path"),
        ("action has risky", "action.risky"),
    ],
)
def test_has_on_a_field_effectgate_never_provides_is_refused(condition: str, field: str) -> None:
    text = f'@id("ok") {HEAD} when {{ context.side_effect == "READ_ONLY" }};\n'
    text += f'@id("guarded") {HEAD} when {{ {condition} }};'
    with pytest.raises(PolicyInvalid) as raised:
        load(text)
    assert "can never match" in raised.value.reason
    assert f"policy 'guarded' tests `has` on {field}, which effectgate never provides" in raised.value.reason
    assert "'ok'" not in raised.value.reason


def test_has_in_an_unless_is_refused_too() -> None:
    """``unless { principal has suspended }`` would silently never exclude anybody."""
    text = f'@id("not-suspended") {HEAD} unless {{ principal has suspended }};'
    with pytest.raises(PolicyInvalid, match=r"'not-suspended' tests `has` on principal\.suspended"):
        load(text)


@pytest.mark.parametrize(
    "clause",
    [
        "when { false }",
        "when { principal.autonomy >= 1 && false }",
        "when { false && principal.autonomy >= 1 }",
        "when { !true }",
        "when { false || !(true || principal.autonomy > 0) }",
        "when { if principal.autonomy > 1 then false else false }",
        "unless { true }",
        "unless { principal.autonomy > 1 || true }",
    ],
)
def test_a_condition_that_is_always_false_is_refused(clause: str) -> None:
    kind = clause.split()[0]
    with pytest.raises(PolicyInvalid) as raised:
        load(f'@id("dead") {HEAD} {clause};')
    assert f"policy 'dead' has a `{kind}` condition that is always" in raised.value.reason


@pytest.mark.parametrize(
    "condition",
    [
        'principal.department == "payments"',
        'context.arguments.path == "x"',
        'resource.owner == "me"',
    ],
)
def test_reading_an_undeclared_field_without_has_is_a_cedar_validation_error(condition: str) -> None:
    with pytest.raises(PolicyInvalid, match="fails validation against the effectgate Cedar schema"):
        load(f'@id("direct") {HEAD} when {{ {condition} }};')


@pytest.mark.parametrize(
    "condition",
    [
        "principal has autonomy && principal.autonomy >= 1",
        'context has operation && context.operation == "read"',
        'principal has roles && principal.roles.contains("ops")',
        "true",
        "principal.autonomy > 0 || false",
    ],
)
def test_guards_on_provided_fields_and_satisfiable_conditions_load(condition: str) -> None:
    assert load(f'@id("fine") {HEAD} when {{ {condition} }};').policy_ids == ("fine",)


def test_the_shipped_policy_loads() -> None:
    deploy = Path(__file__).resolve().parents[3] / "deploy" / "policy"
    assert load_policy(deploy / "policy.cedar", deploy / "principals.toml").policy_ids


def test_load_policy_names_the_file_and_the_policy(tmp_path: Path) -> None:
    policy, principals = tmp_path / "p.cedar", tmp_path / "principals.toml"
    policy.write_text(f'@id("dept") {HEAD} when {{ principal has department }};')
    principals.write_text("[principals.a1]\nautonomy = 1\n")
    with pytest.raises(PolicyInvalid) as raised:
        load_policy(policy, principals)
    assert raised.value.path == str(policy)
    assert str(policy) in raised.value.reason and "'dept'" in raised.value.reason
