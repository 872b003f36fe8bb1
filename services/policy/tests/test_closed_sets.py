"""A policy naming a value that cannot exist is refused at load, naming the policy, the value and its position."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.policy.cedar.attributes import Attributes
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.loading import build_engine, load_policy
from effectgate.policy.errors import PolicyInvalid

DIRECTORY = PrincipalDirectory.from_toml(
    '[principals.a1]\nautonomy = 1\n[approvers.alice]\nroles = ["operator", "finance"]\n'
    '[approvers.bob]\nroles = ["finance", "sre"]\n'
)
ARGS = {
    "type": "object",
    "properties": {
        "currency": {"type": "string", "enum": ["EUR", "USD"]},
        "mode": {"type": "string", "const": "slow"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["urgent", "later"]}},
        "level": {"type": "integer", "enum": [1, 2, 3]},
        "note": {"type": "string"},
        "order": {"type": "object", "properties": {"kind": {"type": "string", "enum": ["buy", "sell"]}}},
    },
}
PAY = ToolDescriptor(
    name="pay",
    version="1.0.0",
    adapter="file_system",
    operations={
        "send": OperationSpec(
            input_schema=ARGS, output_schema={}, side_effect_class=SideEffectClass.FINANCIAL, risk_tier=RiskTier.HIGH
        )
    },
)
HEAD = '@id("typo")\npermit (principal, action == Action::"execute", resource)\n'


def _engine(text: str, descriptors: list[ToolDescriptor] | None = None) -> PolicyEngine:
    return build_engine(text, DIRECTORY, Attributes(), [PAY] if descriptors is None else descriptors)


def _refused(text: str, descriptors: list[ToolDescriptor] | None = None) -> PolicyInvalid:
    with pytest.raises(PolicyInvalid) as refused:
        _engine(text, descriptors)
    return refused.value


def _at(text: str, problem: str) -> str:
    """The text from the ``line:column`` a problem starts with."""
    line, column, _ = problem.split(":", 2)
    return text.splitlines()[int(line) - 1][int(column) - 1 :]


@pytest.mark.parametrize(
    ("condition", "value"),
    [
        ('context.side_effect == "REVERSIBLE_WRTE"', '"REVERSIBLE_WRTE"'),
        ('context.side_effect != "READ_ONY"', '"READ_ONY"'),
        ('"PRODUCTON" == context.side_effect', '"PRODUCTON"'),
        ('["READ_ONLY", "FINANCAL"].contains(context.side_effect)', '"FINANCAL"'),
        ('context.side_effect like "REVERSIBLE_WRTE*"', '"REVERSIBLE_WRTE*"'),
        ('context.risk == "hgh"', '"hgh"'),
        ('context.risk != "Medium"', '"Medium"'),
        ('context.risk like "CRIT*"', '"CRIT*"'),
        ("context.risk_rank == 7", "7"),
        ("context.risk_rank > 4", "4"),
        ("context.side_effect_rank >= 6", "6"),
        ("principal.autonomy == 4", "4"),
        ("principal.autonomy < 0", "0"),
        ('context.args has currency && context.args.currency == "EURO"', '"EURO"'),
        ('context.args has mode && context.args.mode != "fast"', '"fast"'),
        ("context.args has level && context.args.level == 9", "9"),
        ('context.args has tags && context.args.tags.contains("urgnt")', '"urgnt"'),
        ('context.args has tags && context.args.tags.containsAny(["later", "soon"])', '"soon"'),
        ('context.args has order && context.args.order has kind && context.args.order.kind == "hold"', '"hold"'),
    ],
)
@pytest.mark.parametrize("clause", ["when", "unless"])
def test_a_comparison_with_a_value_the_attribute_never_has_is_refused(condition: str, value: str, clause: str) -> None:
    text = f"{HEAD}{clause} {{\n  principal.autonomy >= 1 && {condition}\n}};\n"

    refused = _refused(text)

    assert refused.reason.startswith("policy can never match: 4:"), refused.reason
    assert len(refused.problems) == 1 and "policy 'typo'" in refused.problems[0] and value in refused.problems[0]
    assert _at(text, refused.problems[0]).startswith(value.strip('"') if value.isdigit() else value), refused.problems


def test_the_closest_value_is_offered() -> None:
    refused = _refused(HEAD + 'when { context.side_effect == "REVERSIBLE_WRTE" };')

    assert refused.problems[0].endswith('did you mean "REVERSIBLE_WRITE"?'), refused.problems


@pytest.mark.parametrize("value", [*SideEffectClass])
def test_every_side_effect_class_may_be_compared(value: str) -> None:
    assert _engine(HEAD + f'when {{ context.side_effect == "{value}" || context.side_effect != "{value}" }};')


@pytest.mark.parametrize("value", [*RiskTier])
def test_every_risk_tier_may_be_compared(value: str) -> None:
    assert _engine(HEAD + f'when {{ context.risk == "{value}" && ["{value}"].contains(context.risk) }};')


@pytest.mark.parametrize(
    "condition",
    [
        'context.side_effect like "REVERSIBLE_*"',
        "context.risk_rank <= 4 && context.risk_rank > 3 && principal.autonomy >= 3",
        'context.args has currency && ["EUR", "USD"].contains(context.args.currency)',
        'context.args has note && context.args.note == "anything"',
        'context.args has tags && context.args.tags.containsAll(["urgent", "later"])',
    ],
)
def test_comparisons_with_values_that_can_occur_load(condition: str) -> None:
    assert _engine(HEAD + f"when {{ {condition} }};")


def test_an_argument_some_registered_operation_leaves_open_takes_any_value() -> None:
    schema = {"type": "object", "properties": {"currency": {"type": "string"}}}
    spec = OperationSpec(
        input_schema=schema, output_schema={}, side_effect_class=SideEffectClass.READ_ONLY, risk_tier=RiskTier.LOW
    )
    open_one = ToolDescriptor(name="fx", version="1.0.0", adapter="file_system", operations={"rate": spec})

    assert _engine(HEAD + 'when { context.args has currency && context.args.currency == "GBP" };', [PAY, open_one])


@pytest.mark.parametrize(
    ("annotations", "value", "fragment"),
    [
        ('@approver_role("operatr")', '"operatr"', "names a role no approver in the principal directory holds"),
        ('@approver_role("security")', '"security"', "(roles held: finance, operator, sre)"),
        ('@approver_role("finance") @approvals_required("3")', '"3"', "asks for 3 approvers holding role 'finance'"),
        ('@approver_role("operator") @approvals_required("2")', '"2"', "but 1 hold it"),
        (
            '@approver_role("operator") @approvals_requird("2")',
            "@approvals_requird",
            "did you mean @approvals_required?",
        ),
        ('@approver_role("operator") @reasn("x")', "@reasn", "is no annotation effectgate reads"),
        ('@approver_role("operator") @approver', "@approver", "is no annotation effectgate reads"),
    ],
)
def test_an_annotation_naming_nothing_that_exists_is_refused(annotations: str, value: str, fragment: str) -> None:
    text = f'@id("ask")\n{annotations}\npermit (principal, action == Action::"execute_with_approval", resource);\n'

    refused = _refused(text)

    assert refused.reason.startswith("policy annotation refused: 2:"), refused.reason
    problem = refused.problems[0]
    assert "policy 'ask'" in problem and fragment in problem and _at(text, problem).startswith(value), refused.problems


def test_the_closest_role_is_offered() -> None:
    refused = _refused('@id("ask") @approver_role("operatr") permit (principal, action, resource);')

    assert refused.problems[0].endswith("did you mean 'operator'?"), refused.problems


def test_the_shipped_policy_over_the_shipped_directory_is_valid(repo_root: Path) -> None:
    policy = repo_root / "deploy/policy"

    engine = load_policy(policy / "policy.cedar", policy / "principals.toml", policy / "attributes.toml", [PAY])

    assert len(engine.policy_ids) == 11


def test_a_misspelled_annotation_is_named_before_what_it_leaves_missing() -> None:
    text = '@id("ask")\n@aprover_role("operator")\n'
    text += 'permit (principal, action == Action::"execute_with_approval", resource);\n'

    refused = _refused(text)

    assert refused.problems == (
        "2:1: policy 'ask': @aprover_role is no annotation effectgate reads (it reads @id, @approver_role, "
        "@approvals_required, @reason); did you mean @approver_role?",
    )
