"""The dispatcher answers calls as the Answering protocol says: refusals before running, outcomes after."""

from __future__ import annotations

import asyncio

import msgspec

from effectgate.contracts.tools.hosting import WorkerCall
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools import Context, Dispatcher, Effect, Fault, Reconciled, Refusal, Toolbox, operation, tool
from tools.tests.support import Progress, call_of

READ, WRITE = SideEffectClass.READ_ONLY, SideEffectClass.REVERSIBLE_WRITE
seen: list[Context] = []


@tool(side_effect=READ, risk=RiskTier.LOW)
async def add(a: int, context: Context, b: int = 2) -> int:
    """Add two numbers."""
    seen.append(context)
    return a + b


@tool(side_effect=WRITE, risk=RiskTier.MEDIUM)
async def pay(amount: int) -> Effect[str]:
    """Pay ``amount``."""
    if amount < 0:
        raise Refusal("negative_amount", "an amount is at least 0")
    if amount == 0:
        raise Fault("bank_busy", "the bank is busy", retryable=True)
    if amount > 1000:
        raise RuntimeError("connection dropped after the request was sent")
    return Effect("paid", effect_id=f"pay-{amount}")


@tool(side_effect=READ, risk=RiskTier.LOW)
async def lookup(key: str) -> str:
    """Look ``key`` up."""
    if key == "boom":
        raise RuntimeError("index missing")
    if key == "slow":
        await asyncio.sleep(10)
    return key.upper()


@tool(side_effect=WRITE, risk=RiskTier.LOW)
async def slow_write(value: str) -> str:
    """Write slowly."""
    await asyncio.sleep(10)
    return value


@tool(side_effect=READ, risk=RiskTier.LOW)
def sync_double(n: int) -> int:
    """A sync function runs in a thread."""
    return n * 2


BOX = Toolbox([add, pay, lookup, slow_write, sync_double], worker="calc")
DISPATCHER = Dispatcher(BOX)


async def answer(call: WorkerCall) -> msgspec.Struct:
    return await DISPATCHER.answer(call, Progress())


async def test_a_plain_async_operation_answers_its_result_and_sees_the_call_s_context() -> None:
    result = await DISPATCHER.answer(call_of(BOX, "add", a=1), Progress())
    assert (result.outcome, result.result, result.worker) == ("ok", 3, "calc")
    context = seen[-1]
    assert (context.principal, context.request_id, context.idempotency_key) == ("alice", "req-1", "key-1")
    assert (context.approval_id, context.approvers, context.policy_version) == ("apr-1", ("bob",), "p7")
    assert context.traceparent is not None and context.tool == "add" and context.attempt == 1


async def test_a_sync_function_answers_too() -> None:
    result = await DISPATCHER.answer(call_of(BOX, "sync_double", n=4), Progress())
    assert (result.outcome, result.result) == ("ok", 8)


async def test_an_effect_gives_the_answer_its_effect_id() -> None:
    result = await DISPATCHER.answer(call_of(BOX, "pay", amount=5), Progress())
    assert (result.outcome, result.result, result.effect_id) == ("ok", "paid", "pay-5")


async def test_a_call_binding_another_descriptor_is_refused_naming_both_digests() -> None:
    call = msgspec.structs.replace(call_of(BOX, "add", a=1), descriptor_digest="sha256:" + "0" * 64)
    result = await DISPATCHER.answer(call, Progress())
    assert (result.outcome, result.reason_code) == ("refused", "descriptor_mismatch")
    assert "sha256:" + "0" * 64 in result.reason
    assert DISPATCHER.served()[0].digest in result.reason


async def test_a_mismatched_call_runs_nothing() -> None:
    before = len(seen)
    call = msgspec.structs.replace(call_of(BOX, "add", a=1), descriptor_digest="sha256:" + "1" * 64)
    await DISPATCHER.answer(call, Progress())
    assert len(seen) == before


async def test_an_unknown_tool_or_operation_is_refused() -> None:
    unknown_tool = msgspec.structs.replace(call_of(BOX, "add", a=1), tool="nothing")
    unknown_operation = msgspec.structs.replace(call_of(BOX, "add", a=1), operation="sub")
    first, second = (
        await DISPATCHER.answer(unknown_tool, Progress()),
        await DISPATCHER.answer(unknown_operation, Progress()),
    )
    assert (first.outcome, first.reason_code) == ("refused", "unknown_tool")
    assert (second.outcome, second.reason_code) == ("refused", "unknown_operation")


async def test_arguments_the_input_schema_refuses_are_refused_naming_the_pointer() -> None:
    result = await DISPATCHER.answer(call_of(BOX, "add", a="one"), Progress())
    assert (result.outcome, result.reason_code) == ("refused", "invalid_arguments")
    assert result.reason.startswith("/a: ")
    extra = await DISPATCHER.answer(call_of(BOX, "add", a=1, c=3), Progress())
    assert (extra.outcome, extra.reason_code) == ("refused", "invalid_arguments")


async def test_a_refusal_a_fault_and_an_error_of_a_write_map_to_refused_failed_and_uncertain() -> None:
    refused = await DISPATCHER.answer(call_of(BOX, "pay", amount=-1), Progress())
    failed = await DISPATCHER.answer(call_of(BOX, "pay", amount=0), Progress())
    unclear = await DISPATCHER.answer(call_of(BOX, "pay", amount=5000), Progress())
    assert (refused.outcome, refused.reason_code, refused.retryable) == ("refused", "negative_amount", False)
    assert (failed.outcome, failed.reason_code, failed.retryable) == ("failed", "bank_busy", True)
    assert (unclear.outcome, unclear.reason_code, unclear.result) == ("uncertain", "tool_error", None)
    assert "connection dropped" in unclear.reason


async def test_an_error_of_a_read_is_failed() -> None:
    result = await DISPATCHER.answer(call_of(BOX, "lookup", key="boom"), Progress())
    assert (result.outcome, result.reason_code, result.retryable) == ("failed", "tool_error", False)


async def test_the_deadline_ends_a_read_failed_and_a_write_uncertain() -> None:
    read = await DISPATCHER.answer(call_of(BOX, "lookup", deadline_s=0.1, key="slow"), Progress())
    write = await DISPATCHER.answer(call_of(BOX, "slow_write", deadline_s=0.1, value="v"), Progress())
    assert (read.outcome, read.reason_code) == ("failed", "tool_timeout")
    assert (write.outcome, write.reason_code) == ("uncertain", "tool_timeout")


async def test_a_call_past_its_deadline_is_refused_before_running() -> None:
    result = await DISPATCHER.answer(call_of(BOX, "slow_write", deadline_s=-1, value="v"), Progress())
    assert (result.outcome, result.reason_code) == ("refused", "deadline_passed")


@tool(side_effect=READ, risk=RiskTier.LOW)
async def bad_read() -> int:
    return "not a number"  # type: ignore[return-value]


@tool(side_effect=WRITE, risk=RiskTier.LOW)
async def bad_write() -> int:
    return object()  # type: ignore[return-value]


@tool(side_effect=WRITE, risk=RiskTier.LOW)
class Orders:
    @operation(reconcile="find")
    async def place(self, order: str) -> str:
        return order

    @operation(side_effect=READ)
    async def find(self, order: str) -> Reconciled:
        return {"resolution": "maybe"}  # type: ignore[return-value]


async def test_a_result_the_output_schema_refuses_is_output_invalid_failed_for_a_read_uncertain_for_a_write() -> None:
    box = Toolbox([bad_read, bad_write], worker="w")
    read = await Dispatcher(box).answer(call_of(box, "bad_read"), Progress())
    write = await Dispatcher(box).answer(call_of(box, "bad_write"), Progress())
    assert (read.outcome, read.reason_code, read.result) == ("failed", "output_invalid", None)
    assert (write.outcome, write.reason_code, write.result) == ("uncertain", "output_invalid", None)


async def test_a_reconcile_operation_s_result_must_be_a_reconcile_answer() -> None:
    box = Toolbox([Orders], worker="w")
    answer = await Dispatcher(box).answer(call_of(box, "orders", "find", order="o1"), Progress())
    assert (answer.outcome, answer.reason_code) == ("failed", "output_invalid")
