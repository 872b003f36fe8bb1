"""A Python tool's call on a real bus: each answer and each silence ends the request as it must; retries where safe."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from effectgate.contracts.tools.hosting import WorkerAnswer, WorkerCall
from effectgate.contracts.vocabulary import Outcome

from .conftest import Responder, bank, ok

pytestmark = pytest.mark.connected


def failing(code: str, times: int, retryable: bool = True) -> Any:
    """Fails ``times`` calls (transiently), then answers ok."""

    async def behave(call: WorkerCall, responder: Responder) -> WorkerAnswer:
        if len(responder.calls) <= times:
            return WorkerAnswer(call_id=call.call_id, outcome="failed", reason_code=code, retryable=retryable)
        return WorkerAnswer(call_id=call.call_id, outcome="ok", result={"balance": 5})

    return behave


def answering(outcome: str, code: str) -> Any:
    async def behave(call: WorkerCall, responder: Responder) -> WorkerAnswer:
        return WorkerAnswer(call_id=call.call_id, outcome=outcome, reason_code=code, reason=f"said {code}")  # type: ignore[arg-type]

    return behave


async def silent(call: WorkerCall, responder: Responder) -> None:
    return None


async def _run(harness_of: Any, tools: Any, worker: str, operation: str) -> Any:
    harness = harness_of(bank(worker), tools)
    await asyncio.wait_for(harness.executor.on_decision(harness.decision(operation, {"account": "a"})), 10)
    return harness.bus.receipts["r1"]


async def test_an_ok_answer_with_an_effect_id_is_a_receipt_naming_it(
    harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    worker_ = await responder(ok({"paid": True}, effect_id="pay_123"))
    issued = await _run(harness_of, tools, worker, "pay")
    assert (issued.outcome, issued.result, issued.target_effect_id) == (Outcome.SUCCEEDED, {"paid": True}, "pay_123")
    [call] = worker_.calls
    assert worker_.forged == 0 and call.tool == f"{worker}_bank" and call.operation == "pay" and call.attempt == 1
    assert call.context.principal == "demo-agent" and call.context.request_id == "r1"
    assert call.arguments == {"account": "a"} and call.descriptor_digest.startswith("sha256:")


async def test_a_refusal_is_never_retried(harness_of: Any, tools: Any, worker: str, responder: Any) -> None:
    worker_ = await responder(answering("refused", "over_limit"))
    issued = await _run(harness_of, tools, worker, "lookup")
    assert (issued.outcome, issued.reason_code) == (Outcome.REFUSED, "over_limit") and len(worker_.calls) == 1


async def test_a_read_is_retried_on_a_transient_fault_as_its_policy_says(
    harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    worker_ = await responder(failing("busy", times=2))
    issued = await _run(harness_of, tools, worker, "lookup")
    assert (issued.outcome, issued.result) == (Outcome.SUCCEEDED, {"balance": 5})
    assert [call.attempt for call in worker_.calls] == [1, 2, 3]
    assert len({call.call_id for call in worker_.calls}) == 3


async def test_a_read_is_not_retried_on_a_fault_its_policy_does_not_name(
    harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    worker_ = await responder(failing("quota", times=1))
    issued = await _run(harness_of, tools, worker, "lookup_busy_only")
    assert (issued.outcome, issued.reason_code) == (Outcome.FAILED, "quota") and len(worker_.calls) == 1


async def test_a_write_is_never_retried_whatever_its_policy_says(
    harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    worker_ = await responder(failing("busy", times=2))
    issued = await _run(harness_of, tools, worker, "pay")
    assert (issued.outcome, issued.reason_code) == (Outcome.FAILED, "busy") and len(worker_.calls) == 1


async def test_a_write_idempotent_at_its_target_is_retried(
    harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    worker_ = await responder(failing("busy", times=1))
    issued = await _run(harness_of, tools, worker, "pay_idempotent")
    assert issued.outcome is Outcome.SUCCEEDED and [call.attempt for call in worker_.calls] == [1, 2]


async def test_a_worker_s_uncertain_answer_is_an_uncertain_receipt(
    harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    await responder(answering("uncertain", "crashed_mid_write"))
    issued = await _run(harness_of, tools, worker, "pay")
    assert (issued.outcome, issued.reason_code) == (Outcome.UNCERTAIN, "crashed_mid_write")


async def test_with_no_worker_running_the_call_is_refused_unavailable(harness_of: Any, tools: Any, worker: str) -> None:
    for operation in ("pay", "lookup"):
        issued = await _run(harness_of, tools, worker, operation)
        assert (issued.outcome, issued.reason_code) == (Outcome.REFUSED, "tool_unavailable"), operation


async def test_a_write_its_worker_never_answers_is_uncertain(
    harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    worker_ = await responder(silent)
    issued = await _run(harness_of, tools, worker, "pay")
    assert (issued.outcome, issued.reason_code) == (Outcome.UNCERTAIN, "tool_timeout") and len(worker_.calls) == 1


async def test_a_read_its_worker_never_answers_fails_after_its_retries(
    harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    worker_ = await responder(silent)
    issued = await _run(harness_of, tools, worker, "lookup")
    assert (issued.outcome, issued.reason_code) == (Outcome.FAILED, "tool_timeout")
    assert [call.attempt for call in worker_.calls] == [1, 2, 3]


async def test_an_answer_to_another_call_is_no_answer_and_a_write_ends_uncertain(
    harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    async def misdirected(call: WorkerCall, responder: Responder) -> WorkerAnswer:
        return WorkerAnswer(call_id="someone-else", outcome="ok", result={})

    await responder(misdirected)
    issued = await _run(harness_of, tools, worker, "pay")
    assert (issued.outcome, issued.reason_code) == (Outcome.UNCERTAIN, "malformed_reply")
