"""A hostile or broken worker on a real bus and Redis: whatever it answers, the receipt says what is known.

Forged shapes (not JSON, an output the schema refuses, a code that is no code, an effect id too long
for a receipt), two answers to one call (the first is taken: the worker is the tool, the executor
trusts it), an answer after the deadline, and the serialization lock of a call whose answer never
came, held by a killed executor or raced for by two executors.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client
from nats.aio.msg import Msg

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.hosting import CallContext, WorkerAnswer, WorkerCall, WorkerSubjects
from effectgate.contracts.vocabulary import Outcome
from effectgate.executor.adapters.python.host import PythonToolHost
from effectgate.executor.adapters.python.serial import LEASE_MARGIN_S, Serializer, lock_key
from effectgate.executor.effects.calling import call_context
from effectgate.executor.errors import ToolOutcomeUnknown, ToolRefused

from .conftest import EXECUTOR, Responder, bank

pytestmark = pytest.mark.connected


async def _run(harness_of: Any, tools: Any, descriptor: ToolDescriptor, operation: str) -> Any:
    harness = harness_of(descriptor, tools)
    await asyncio.wait_for(harness.executor.on_decision(harness.decision(operation, {"account": "a"})), 15)
    return harness.bus.receipts["r1"]


async def _raw(nc: Client, worker: str, *replies: bytes, delay_s: float = 0.0) -> list[str]:
    """A worker that answers every call with ``replies`` (raw bytes, in order); returns the call ids seen."""
    seen: list[str] = []

    async def answer(msg: Msg) -> None:
        call_id = msgspec.json.decode(msg.data, type=WorkerCall).call_id
        seen.append(call_id)
        await asyncio.sleep(delay_s)
        for reply in replies:
            await msg.respond(reply.replace(b"CALL", call_id.encode()))

    await nc.subscribe(WorkerSubjects.calls(worker), queue=WorkerSubjects.queue(worker), cb=answer)
    await nc.flush()
    return seen


def _answer(outcome: str, **fields: Any) -> bytes:
    return msgspec.json.encode(WorkerAnswer(call_id="CALL", outcome=outcome, **fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(("operation", "outcome"), [("pay", Outcome.UNCERTAIN), ("lookup", Outcome.FAILED)])
async def test_an_answer_that_is_not_json_is_no_answer(
    nc: Client, harness_of: Any, tools: Any, worker: str, operation: str, outcome: Outcome
) -> None:
    await _raw(nc, worker, b"\xff\x00 not json {")
    issued = await _run(harness_of, tools, bank(worker), operation)
    assert (issued.outcome, issued.reason_code) == (outcome, "malformed_reply")


async def test_an_ok_result_the_output_schema_refuses_leaves_a_write_uncertain(
    nc: Client, harness_of: Any, tools: Any, worker: str
) -> None:
    descriptor = bank(worker)
    strict = msgspec.structs.replace(descriptor.operations["pay"], output_schema={"type": "object", "required": ["id"]})
    descriptor = msgspec.structs.replace(descriptor, operations={**descriptor.operations, "pay": strict})
    await _raw(nc, worker, _answer("ok", result=[1, 2, 3]))
    issued = await _run(harness_of, tools, descriptor, "pay")
    assert (issued.outcome, issued.reason_code) == (Outcome.UNCERTAIN, "output_invalid") and issued.result is None


async def test_of_two_answers_to_one_call_the_first_is_the_receipt(
    nc: Client, harness_of: Any, tools: Any, worker: str
) -> None:
    """The worker is trusted with its own tool's outcome: a ``failed`` then an ``ok`` is ``failed``."""
    await _raw(nc, worker, _answer("failed", reason_code="declined"), _answer("ok", result={}))
    issued = await _run(harness_of, tools, bank(worker), "pay")
    assert (issued.outcome, issued.reason_code) == (Outcome.FAILED, "declined")


async def test_an_answer_after_the_deadline_leaves_a_write_uncertain(
    nc: Client, harness_of: Any, tools: Any, worker: str
) -> None:
    seen = await _raw(nc, worker, _answer("ok", result={}), delay_s=2.5)
    issued = await _run(harness_of, tools, bank(worker, timeout_s=1.0), "pay")
    assert (issued.outcome, issued.reason_code) == (Outcome.UNCERTAIN, "tool_timeout") and len(seen) == 1


@pytest.mark.parametrize("code", ["sk-live-1234 leaked", "Declined", "a\nnew line", "x" * 65, ""])
async def test_a_reason_code_that_is_no_code_is_replaced_by_the_outcome(
    nc: Client, harness_of: Any, tools: Any, worker: str, code: str
) -> None:
    await _raw(nc, worker, _answer("failed", reason_code=code, reason="said so"))
    issued = await _run(harness_of, tools, bank(worker), "pay")
    assert (issued.outcome, issued.reason_code) == (Outcome.FAILED, "failed")


async def test_an_effect_id_too_long_for_a_receipt_still_ends_in_one_receipt(
    nc: Client, harness_of: Any, tools: Any, worker: str
) -> None:
    await _raw(nc, worker, _answer("ok", result={"paid": True}, effect_id="e" * 200_000))
    issued = await _run(harness_of, tools, bank(worker), "pay")
    assert issued.outcome is Outcome.SUCCEEDED and len(msgspec.json.encode(issued)) < 64_000


# --- the serialization lock ------------------------------------------------------------------


def _context(harness: Any, rid: str, timeout_s: float) -> CallContext:
    decision = harness.decision("close_books", {"account": "a"}, rid=rid, key=rid)
    return call_context(decision, None, datetime.now(UTC), timeout_s)


async def test_a_serialized_write_whose_answer_never_came_keeps_its_lock_until_the_lease_ends(
    python_host: PythonToolHost, harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    """Its worker may still be running it (a sync tool's thread is not stopped by the deadline)."""
    descriptor = bank(worker, timeout_s=1.0)
    harness = harness_of(descriptor, tools)

    async def first_hangs(call: WorkerCall, responder: Responder) -> WorkerAnswer | None:
        if call.context.request_id == "r1":
            await asyncio.sleep(30)
        return WorkerAnswer(call_id=call.call_id, outcome="ok", result={})

    worker_ = await responder(first_hangs)
    with pytest.raises(ToolOutcomeUnknown):
        await python_host.call(worker, descriptor, "close_books", {}, _context(harness, "r1", 1.0))
    with pytest.raises(ToolRefused) as busy:
        await python_host.call(worker, descriptor, "close_books", {}, _context(harness, "r2", 1.0))
    assert busy.value.reason_code == "tool_busy" and [c.context.request_id for c in worker_.calls] == ["r1"]


async def test_a_lock_a_killed_executor_held_frees_itself_when_its_lease_ends(
    python_host: PythonToolHost, redis_client: aioredis.Redis, harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    descriptor = bank(worker, timeout_s=1.0)
    harness = harness_of(descriptor, tools)
    worker_ = await responder(lambda call, _: _ok(call))
    key = lock_key(descriptor.name, descriptor.operations["close_books"], {})
    lease_ms = int((descriptor.timeout_s + LEASE_MARGIN_S) * 1000)
    assert await redis_client.set(key, "dead-executor-token", nx=True, px=lease_ms)  # taken, never released
    started = time.monotonic()
    with pytest.raises(ToolRefused):
        await python_host.call(worker, descriptor, "close_books", {}, _context(harness, "r1", 1.0))
    await python_host.call(worker, descriptor, "close_books", {}, _context(harness, "r2", LEASE_MARGIN_S + 2))
    assert time.monotonic() - started < lease_ms / 1000 + 3 and len(worker_.calls) == 1


async def test_two_executors_racing_for_one_lock_run_one_call_at_a_time(
    nc: Client, redis_url: str, harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    descriptor = bank(worker, timeout_s=3.0)
    harness = harness_of(descriptor, tools)

    async def slow(call: WorkerCall, responder: Responder) -> WorkerAnswer:
        await asyncio.sleep(0.3)
        return WorkerAnswer(call_id=call.call_id, outcome="ok", result={})

    worker_ = await responder(slow)
    clients = [aioredis.Redis.from_url(redis_url) for _ in range(2)]
    hosts = [PythonToolHost(nc, EXECUTOR, Serializer(client)) for client in clients]
    calls = [
        host.call(worker, descriptor, "close_books", {}, _context(harness, f"r{n}", 3.0))
        for n, host in enumerate(hosts * 2)
    ]
    await asyncio.gather(*calls)
    spans = sorted(worker_.spans)
    assert len(spans) == 4 and all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))
    for client in clients:
        await client.aclose()


async def _ok(call: WorkerCall) -> WorkerAnswer:
    return WorkerAnswer(call_id=call.call_id, outcome="ok", result={})
