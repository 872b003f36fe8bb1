from __future__ import annotations

from typing import Any

import msgspec
import pytest

from effectgate.contracts.tools.descriptors import OperationSpec
from effectgate.contracts.tools.pointers import MISSING, pointer_problem, resolve, spec_problem
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass

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


TYPED = {
    "type": "object",
    "properties": {
        "note": {"type": "string"},
        "url": {"type": "string", "format": "uri"},
        "cents": {"type": "integer"},
        "sum": {"type": "number"},
        "maybe": {"type": ["number", "null"]},
        "flag": {"type": "boolean"},
        "items": {"type": "array"},
        "free": {},
        "fixed": {"const": 5},
        "choice": {"enum": ["a", 1]},
        "nested": {"type": "object", "properties": {"iban": {"type": "string"}, "sum": {"type": "number"}}},
    },
}


@pytest.mark.parametrize(
    ("field", "pointer", "fragment"),
    [
        ("amount", "/note", "of type string; it must be integer or number"),
        ("amount", "/flag", "of type boolean"),
        ("amount", "/items", "of type array"),
        ("amount", "/maybe", "of type null or number"),
        ("amount", "/free", "declares no type"),
        ("amount", "/choice", "of type integer or string"),
        ("amount", "/nested/iban", "of type string"),
        ("amount", "/absent", "no property 'absent'"),
        ("destination", "/sum", "of type number; it must be string"),
        ("destination", "/nested", "of type object"),
        ("destination", "/fixed", "of type integer"),
        ("cost", "/note", "of type string; it must be integer or number"),
        ("cost", "/free", "declares no type"),
    ],
)
def test_a_pointer_must_name_an_argument_of_the_type_its_field_reads(field: str, pointer: str, fragment: str) -> None:
    problem = spec_problem(msgspec.structs.replace(spec(), input_schema=TYPED, **{field: pointer}))

    assert problem is not None and problem.startswith(f"{field}: {pointer!r}") and fragment in problem, problem


@pytest.mark.parametrize(
    ("field", "pointer"),
    [
        ("amount", "/cents"),
        ("amount", "/sum"),
        ("amount", "/fixed"),
        ("amount", "/nested/sum"),
        ("cost", "/cents"),
        ("destination", "/url"),
        ("destination", "/nested/iban"),
    ],
)
def test_a_pointer_at_an_argument_of_a_type_its_field_reads_passes(field: str, pointer: str) -> None:
    assert spec_problem(msgspec.structs.replace(spec(), input_schema=TYPED, **{field: pointer})) is None
