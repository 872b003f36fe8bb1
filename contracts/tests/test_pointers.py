from __future__ import annotations

from typing import Any

import pytest

from toolgate.contracts.descriptors import OperationSpec
from toolgate.contracts.pointers import MISSING, pointer_problem, resolve, spec_problem
from toolgate.contracts.vocabulary import RiskTier, SideEffectClass

SCHEMA = {
    "type": "object",
    "properties": {"amount": {"type": "number"}, "to": {"type": "object", "properties": {"iban": {"type": "string"}}}},
}


def spec(**kw: Any) -> OperationSpec:
    return OperationSpec(
        input_schema=SCHEMA,
        output_schema={},
        side_effect_class=SideEffectClass.FINANCIAL,
        risk_tier=RiskTier.HIGH,
        **kw,
    )


def test_resolve_reads_nested_arguments_and_says_missing() -> None:
    assert resolve("/to/iban", {"to": {"iban": "DE1"}}) == "DE1"
    assert resolve("/amount", {}) is MISSING
    assert resolve("/to/iban", {"to": "flat"}) is MISSING


@pytest.mark.parametrize(
    ("pointer", "fragment"),
    [
        ("amount", "not a JSON Pointer"),
        ("", "whole arguments"),
        ("/missing", "no property 'missing'"),
        ("/to/bic", "no property 'to/bic'"),
        ("/amount/x", "no property 'amount/x'"),
    ],
)
def test_a_pointer_must_name_a_declared_argument(pointer: str, fragment: str) -> None:
    problem = pointer_problem(pointer, SCHEMA)
    assert problem is not None and fragment in problem


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"destination": "/url"}, "destination:"),
        ({"amount": "amount"}, "amount:"),
        ({"cost": "/nope"}, "cost:"),
        ({"cost": -1.0}, "at least 0"),
        ({"cost": float("inf")}, "finite"),
        ({"cost": 0.00001}, "4 decimal places"),
    ],
)
def test_spec_problem_names_the_field(fields: dict[str, Any], fragment: str) -> None:
    problem = spec_problem(spec(**fields))
    assert problem is not None and fragment in problem


def test_valid_pointers_and_costs_pass() -> None:
    assert spec_problem(spec(amount="/amount", cost="/amount", destination="/to/iban")) is None
    assert spec_problem(spec(cost=2.5)) is None
    assert spec_problem(spec()) is None
