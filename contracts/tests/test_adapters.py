"""A descriptor's adapter must be one the executor has; every place that checks asks the same declaration."""

from __future__ import annotations

import pytest

from effectgate.contracts.tools.adapters import ADAPTERS, adapter_kind, adapter_problem
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.tools.references import reference_problem
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass


@pytest.mark.parametrize(
    "adapter",
    [
        "python:mod.fn",
        "",
        "none",
        "http",
        "mcp",
        "mcp:",
        "mcp:Bank",
        "mcp:a-b",
        "mcp:" + "x" * 40,
        "file_system:x",
        "FILE_SYSTEM",
        " file_system",
        "worker:bank",
    ],
)
def test_an_adapter_the_executor_does_not_have_is_named_with_the_ones_it_has(adapter: str) -> None:
    problem = adapter_problem(adapter)

    assert problem is not None and problem.startswith(f"adapter: {adapter[:80]!r} is no adapter"), problem
    assert all(spelling in problem for spelling in ADAPTERS.values())
    assert adapter_kind(adapter) is None


@pytest.mark.parametrize(("adapter", "kind"), [("file_system", ("file_system", "")), ("mcp:bank", ("mcp", "bank"))])
def test_the_adapters_the_executor_has_pass(adapter: str, kind: tuple[str, str]) -> None:
    assert adapter_problem(adapter) is None and adapter_kind(adapter) == kind


def test_an_mcp_adapter_must_name_a_configured_server_when_the_servers_are_known() -> None:
    assert adapter_problem("mcp:bank", {"bank", "time"}) is None
    problem = adapter_problem("mcp:bnak", {"bank", "time"})
    assert problem == "adapter: 'mcp:bnak' names no configured MCP server (configured: bank, time)"
    assert adapter_problem("mcp:bank", set()) == "adapter: 'mcp:bank' names no configured MCP server (configured: none)"


def _descriptor(adapter: str, amount: str | None = None) -> ToolDescriptor:
    schema = {"type": "object", "properties": {"memo": {"type": "string"}, "sum": {"type": "number"}}}
    spec = OperationSpec(
        input_schema=schema,
        output_schema={},
        side_effect_class=SideEffectClass.FINANCIAL,
        risk_tier=RiskTier.HIGH,
        amount=amount,
    )
    return ToolDescriptor(name="bank", version="1.0.0", adapter=adapter, operations={"pay": spec})


def test_a_descriptor_reference_problem_names_the_code_and_the_field() -> None:
    assert reference_problem(_descriptor("python:mod.fn"))[0] == "invalid_adapter"  # type: ignore[index]
    code, reason = reference_problem(_descriptor("mcp:bank", "/memo")) or ("", "")
    assert (code, reason.split(":")[0]) == ("invalid_pointer", "operations.pay.amount")
    assert reference_problem(_descriptor("mcp:bank", "/sum")) is None
    assert reference_problem(_descriptor("mcp:bank", "/sum"), {"time"}) is not None
