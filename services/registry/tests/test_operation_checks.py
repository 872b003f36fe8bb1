"""Publish refuses what an operation declares about how it runs when it cannot be run safely, naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from effectgate.contracts.tools.descriptors import OperationSpec, RetryPolicy, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.registry.domain import validate_descriptor
from effectgate.registry.errors import PublishRefused

INPUT = {"type": "object", "properties": {"account": {"type": "string"}, "to": {"type": "object", "properties": {}}}}
ANSWER = {
    "type": "object",
    "properties": {
        "resolution": {"enum": ["ran", "not_run", "unknown"]},
        "effect_id": {"type": ["string", "null"]},
        "note": {"type": "string"},
    },
    "required": ["resolution"],
}
READ, WRITE = SideEffectClass.READ_ONLY, SideEffectClass.FINANCIAL


def op(side: SideEffectClass = READ, output: dict[str, Any] | None = None, **fields: Any) -> OperationSpec:
    return OperationSpec(
        input_schema=INPUT,
        output_schema=output or {"type": "object"},
        side_effect_class=side,
        risk_tier=RiskTier.LOW,
        **fields,
    )


def tool(secrets: tuple[str, ...] = (), **operations: OperationSpec) -> ToolDescriptor:
    return ToolDescriptor(
        name="bank", version="1.0.0", adapter="python:payments", operations=operations, secrets=secrets
    )


def refused(descriptor: ToolDescriptor) -> tuple[str, str]:
    with pytest.raises(PublishRefused) as caught:
        validate_descriptor(descriptor)
    return caught.value.reason_code, caught.value.reason


def test_what_can_run_safely_is_published() -> None:
    validate_descriptor(
        tool(
            ("BANK_TOKEN", "A"),
            lookup=op(retry=RetryPolicy()),
            pay=op(WRITE, retry=RetryPolicy(attempts=2), idempotent_at_target=True, reconcile="status"),
            status=op(output=ANSWER),
            transfer=op(WRITE, concurrency_safe=False, serialize_by="/account"),
            export=op(output={"type": "array"}, streaming=True),
        )
    )


def test_a_retry_on_a_write_not_idempotent_at_its_target_is_refused() -> None:
    code, reason = refused(tool(pay=op(WRITE, retry=RetryPolicy())))
    assert code == "invalid_operation" and reason.startswith("operations.pay.retry: a write is retried only when")


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        (RetryPolicy(attempts=0), "attempts"),
        (RetryPolicy(attempts=11), "attempts"),
        (RetryPolicy(backoff_s=-1), "backoff_s"),
    ],
)
def test_a_retry_policy_out_of_bounds_is_refused(policy: RetryPolicy, field: str) -> None:
    code, reason = refused(tool(lookup=op(retry=policy)))
    assert code == "invalid_operation" and reason.startswith(f"operations.lookup.retry.{field}: ")


def test_a_reconcile_naming_no_operation_or_a_write_is_refused() -> None:
    code, reason = refused(tool(pay=op(WRITE, reconcile="missing")))
    assert (code, reason) == ("invalid_operation", "operations.pay.reconcile: bank has no operation 'missing'")
    code, reason = refused(tool(pay=op(WRITE, reconcile="refund"), refund=op(WRITE, output=ANSWER)))
    assert reason.startswith("operations.pay.reconcile: 'refund' is FINANCIAL; a reconcile operation is READ_ONLY")


def test_a_reconcile_whose_output_refuses_a_reconcile_answer_is_refused() -> None:
    narrow = {**ANSWER, "properties": {**ANSWER["properties"], "resolution": {"enum": ["ran"]}}}
    code, reason = refused(tool(pay=op(WRITE, reconcile="status"), status=op(output=narrow)))
    assert code == "invalid_operation"
    assert reason.startswith("operations.pay.reconcile: the output schema of 'status' refuses the ReconcileAnswer")
    assert "not_run" in reason


def test_only_a_write_declares_a_reconcile() -> None:
    code, reason = refused(tool(lookup=op(reconcile="status"), status=op(output=ANSWER)))
    assert code == "invalid_operation" and reason.startswith("operations.lookup.reconcile: only a write")


@pytest.mark.parametrize(
    ("fields", "found"),
    [
        ({"concurrency_safe": False, "serialize_by": "/nowhere"}, "the input schema declares no property 'nowhere'"),
        ({"concurrency_safe": False, "serialize_by": "account"}, "is not a JSON Pointer"),
        ({"concurrency_safe": False, "serialize_by": "/to/bank"}, "declares no property 'to/bank'"),
        ({"serialize_by": "/account"}, "only an operation declared concurrency_safe=false is serialized"),
    ],
)
def test_a_serialize_by_that_names_no_argument_is_refused(fields: dict[str, Any], found: str) -> None:
    code, reason = refused(tool(transfer=op(WRITE, **fields)))
    assert code == "invalid_pointer" and reason.startswith("operations.transfer.serialize_by: ") and found in reason


def test_a_streaming_operation_without_an_array_output_is_refused() -> None:
    code, reason = refused(tool(export=op(streaming=True)))
    assert code == "invalid_operation" and reason.startswith("operations.export.streaming: its result is the array")


@pytest.mark.parametrize("name", ["bank_token", "1TOKEN", "TOKEN-X", "T" * 65, ""])
def test_a_secret_name_that_is_no_capital_variable_name_is_refused(name: str) -> None:
    code, reason = refused(tool((name,), lookup=op()))
    assert code == "invalid_name" and reason.startswith("secrets: names must match") and repr(name[:64]) in reason
