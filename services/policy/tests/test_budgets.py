"""The budgets file, the cost of a call and the windows: pure, no I/O."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from effectgate.contracts.tools.descriptors import OperationSpec
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.policy.budgets.rules import (
    ANY_PRINCIPAL,
    Budget,
    CostUnknown,
    as_cost,
    cost_units,
    load_budgets,
    parse_budgets,
    units_of,
    window_start,
)
from effectgate.policy.errors import PolicyInvalid

DAILY = """
[[budgets]]
name = "daily-transfers"
principal = "bank-agent"
tool = "mcp_bank"
operation = "send_money"
limit = 3
window_s = 86400

[[budgets]]
name = "hourly-amount"
principal = "*"
tool = "mcp_bank"
limit = "1000.50"
window_s = 3600
"""


def _spec(cost: float | str | None) -> OperationSpec:
    schema = {"type": "object", "properties": {"amount": {"type": "number"}, "to": {"type": "string"}}}
    return OperationSpec(
        input_schema=schema,
        output_schema={},
        side_effect_class=SideEffectClass.FINANCIAL,
        risk_tier=RiskTier.HIGH,
        cost=cost,
    )


def test_a_file_parses_into_budgets_in_file_order() -> None:
    book = parse_budgets(DAILY)
    assert book.budgets == (
        Budget("daily-transfers", "bank-agent", 30_000, 86_400, "mcp_bank", "send_money"),
        Budget("hourly-amount", ANY_PRINCIPAL, 10_005_000, 3_600, "mcp_bank", None),
    )


def test_a_budget_applies_by_principal_tool_and_operation() -> None:
    book = parse_budgets(DAILY)
    assert [b.name for b in book.applying("bank-agent", "mcp_bank", "send_money")] == [
        "daily-transfers",
        "hourly-amount",
    ]
    assert [b.name for b in book.applying("other-agent", "mcp_bank", "send_money")] == ["hourly-amount"]
    assert [b.name for b in book.applying("bank-agent", "mcp_bank", "balance")] == ["hourly-amount"]
    assert book.applying("bank-agent", "file_system", "send_money") == ()


def test_a_missing_file_is_no_budgets_and_an_unreadable_one_is_refused(tmp_path: Path) -> None:
    assert load_budgets(tmp_path / "absent.toml").budgets == ()
    broken = tmp_path / "budgets.toml"
    broken.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(PolicyInvalid, match="cannot read"):
        load_budgets(broken)
    broken.write_text('[[budgets]]\nname = "a"\n')
    with pytest.raises(PolicyInvalid, match=r"budgets\.toml: budgets\[0\] \(a\): principal: missing"):
        load_budgets(broken)


ENTRY = 'name = "b"\nprincipal = "p"\nlimit = 3\nwindow_s = 60\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[budgets]]\n" + ENTRY + "limt = 4\n", r"budgets\[0\] \(b\): limt: unknown key"),
        ("[[budgets]]\n" + ENTRY.replace("60", '"60"'), r"budgets\[0\] \(b\): window_s: expected `int`, got `str`"),
        ("[[budgets]]\n" + ENTRY.replace("60", "0"), r"window_s: whole seconds from 1"),
        ("[[budgets]]\n" + ENTRY.replace("3", "-1"), r"budgets\[0\] \(b\): limit: .*at least 0"),
        ("[[budgets]]\n" + ENTRY.replace("3", "0.00001"), r"limit: .*more than 4 decimal places"),
        ("[[budgets]]\n" + ENTRY.replace("3", "true"), r"limit: expected `int \| float \| str`, got `bool`"),
        ("[[budgets]]\n" + ENTRY.replace('"b"', '"a b"'), r"budgets\[0\] \(a b\): name: must match"),
        ("[[budgets]]\n" + ENTRY.replace('"p"', '"p.q"'), r'principal: a principal name or "\*"'),
        ("[[budgets]]\n" + ENTRY + 'operation = "send"\n', r"operation: needs tool"),
        ("[[budgets]]\n" + ENTRY + 'tool = "Bank"\n', r"tool: must match"),
        ("[[budgets]]\n" + ENTRY + "[[budgets]]\n" + ENTRY, r"budgets\[1\] \(b\): name: another budget has this name"),
        ("[budget]\nname = 1\n", r"unknown key 'budget'"),
        ("budgets = 3\n", r"array of tables"),
        ("[[budgets]\n", r"not TOML"),
    ],
)
def test_an_invalid_entry_is_refused_naming_the_entry_and_field(text: str, message: str) -> None:
    with pytest.raises(PolicyInvalid, match=message):
        parse_budgets(text)


def test_windows_are_aligned_to_the_unix_epoch() -> None:
    noon = datetime(2026, 11, 29, 12, 30, 15, tzinfo=UTC).timestamp()
    midnight = datetime(2026, 11, 29, tzinfo=UTC).timestamp()
    assert window_start(noon, 86_400) == midnight
    assert window_start(noon, 3_600) == datetime(2026, 11, 29, 12, tzinfo=UTC).timestamp()
    assert window_start(midnight, 86_400) == midnight, "a window starts at its first second"
    assert window_start(midnight - 0.5, 86_400) == midnight - 86_400, "and the instant before is the previous one"
    assert window_start(59.999, 60) == 0 and window_start(60, 60) == 60


@pytest.mark.parametrize(
    ("cost", "arguments", "units"),
    [
        (None, {"amount": 5}, None),
        (1, {}, 10_000),
        (0.0001, {}, 1),
        (0, {}, 0),
        ("/amount", {"amount": 99.99}, 999_900),
        ("/amount", {"amount": 12}, 120_000),
        ("/amount", {"amount": "0.5"}, 5_000),  # a numeric string is an exact number too
    ],
)
def test_the_cost_is_fixed_or_read_at_its_pointer_in_exact_units(
    cost: float | str | None, arguments: dict[str, Any], units: int | None
) -> None:
    assert cost_units(_spec(cost), arguments) == units


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ({}, "the arguments hold no cost at /amount"),
        ({"amount": -1}, "at least 0"),
        ({"amount": True}, "is not a number"),
        ({"amount": "ten"}, "is not a number"),
        ({"amount": [1]}, "is not a number"),
        ({"amount": 1.00001}, "more than 4 decimal places"),
        ({"amount": float("inf")}, "finite"),
        ({"amount": 10**12}, "above the largest cost"),
    ],
)
def test_a_cost_that_cannot_be_known_exactly_is_refused(arguments: dict[str, Any], why: str) -> None:
    with pytest.raises(CostUnknown, match=why):
        cost_units(_spec("/amount"), arguments)


def test_units_print_back_as_the_exact_cost() -> None:
    assert [as_cost(units_of(n, "n")) for n in (100, 99.99, "0.0001", 0, 1000.5)] == [
        "100",
        "99.99",
        "0.0001",
        "0",
        "1000.5",
    ]


def test_an_invalid_budgets_file_leaves_no_policy_in_force(repo_root: Path, tmp_path: Path) -> None:
    """Same as an invalid policy: not ready, every request denied, and the reason names the entry and field."""
    from effectgate.policy.app import _holder
    from effectgate.policy.settings import PolicySettings

    budgets = tmp_path / "budgets.toml"
    budgets.write_text('[[budgets]]\nname = "daily"\nprincipal = "*"\nlimit = 3\nwindow_s = 86400\nwindow = 1\n')
    settings = PolicySettings(
        policy_file=repo_root / "deploy/policy/policy.cedar",
        principals_file=repo_root / "deploy/policy/principals.toml",
        attributes_file=repo_root / "deploy/policy/attributes.toml",
        budgets_file=budgets,
    )
    holder, book = _holder(settings)
    readiness = holder.readiness()
    assert holder.engine is None and book.budgets == () and not readiness.ready
    assert "budgets[0] (daily): window: unknown key" in readiness.reason
    budgets.unlink()
    holder, book = _holder(settings)
    assert holder.problem is None and book.budgets == (), "a missing file is no budgets"
    shipped, _ = _holder(settings.model_copy(update={"budgets_file": repo_root / "deploy/policy/budgets.toml"}))
    assert shipped.problem is None


def test_a_budget_for_a_principal_the_directory_does_not_hold_is_refused() -> None:
    every = '[[budgets]]\nname = "all"\nprincipal = "*"\nlimit = 1\nwindow_s = 60\n'
    parse_budgets(every).check_principals({"bank-agent"}, "budgets.toml")  # "*" names nobody
    book = parse_budgets(every + '[[budgets]]\nname = "typo"\nprincipal = "bank-agnet"\nlimit = 1\nwindow_s = 60\n')
    with pytest.raises(PolicyInvalid, match=r"budgets.toml: budgets\[1\] \(typo\): principal: 'bank-agnet' is not in"):
        book.check_principals({"bank-agent"}, "budgets.toml")
