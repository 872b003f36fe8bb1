"""The ledger's tools as a worker's dispatcher answers them (no bus: the end-to-end test is in tests/e2e)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ledger.store import Ledger

from effectgate.contracts.tools.descriptors import descriptor_digest
from effectgate.contracts.tools.hosting import CallContext, WorkerCall
from effectgate.tools import Dispatcher, dispatcher_for_module, toolbox_for_module

MODULE = "ledger.tools"


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ledger]:
    monkeypatch.setenv("LEDGER_DB", str(tmp_path / "ledger.sqlite3"))
    yield Ledger()


@pytest.fixture
def dispatcher(ledger: Ledger) -> Dispatcher:
    return dispatcher_for_module(MODULE, "ledger")


def _call(tool: str, operation: str | None, arguments: dict[str, Any]) -> WorkerCall:
    descriptor = next(d for d in toolbox_for_module(MODULE, "ledger").descriptors() if d.name == tool)
    deadline = datetime.now(UTC) + timedelta(seconds=5)
    context = CallContext(principal="a1-00", request_id="req-1", idempotency_key="key-1", deadline=deadline)
    return WorkerCall(
        call_id="call-1", tool=tool, version=descriptor.version, descriptor_digest=descriptor_digest(descriptor),
        operation=operation or tool, arguments=arguments, context=context,
    )  # fmt: skip


async def _answer(dispatcher: Dispatcher, tool: str, operation: str | None = None, **arguments: Any) -> Any:
    async def progress(items: int, message: str) -> None:
        pass

    return await dispatcher.answer(_call(tool, operation, arguments), progress)


async def test_a_refund_carries_its_refund_id_and_its_reconcile_step_finds_it(
    ledger: Ledger, dispatcher: Dispatcher
) -> None:
    await ledger.add_order("ORD-1", "ada", 100.0)
    assert (await _answer(dispatcher, "refunds", "refund_status", order_id="ORD-1", amount=30.0)).result == {
        "resolution": "not_run", "effect_id": None, "note": "the ledger holds no refund of ORD-1 for this call"
    }  # fmt: skip
    done = await _answer(dispatcher, "refunds", "refund", order_id="ORD-1", amount=30.0)
    assert done.outcome == "ok" and done.effect_id == done.result["refund_id"]
    found = await _answer(dispatcher, "refunds", "refund_status", order_id="ORD-1", amount=30.0)
    assert (found.result["resolution"], found.result["effect_id"]) == ("ran", done.effect_id)


async def test_a_refund_above_what_is_left_is_refused_and_writes_nothing(
    ledger: Ledger, dispatcher: Dispatcher
) -> None:
    await ledger.add_order("ORD-2", "bob", 10.0)
    answer = await _answer(dispatcher, "refunds", "refund", order_id="ORD-2", amount=11.0)
    assert (answer.outcome, answer.reason_code) == ("refused", "refund_exceeds_order")
    assert await ledger.refunds() == []


async def test_a_busy_ledger_is_a_retryable_fault_of_a_read(ledger: Ledger, dispatcher: Dispatcher) -> None:
    await ledger.add_order("ORD-3", "cy", 5.0)
    with sqlite3.connect(ledger.path) as holder:
        holder.execute("BEGIN EXCLUSIVE")
        answer = await _answer(dispatcher, "lookup_order", order_id="ORD-3")
    assert (answer.outcome, answer.reason_code, answer.retryable) == ("failed", "ledger_busy", True)
    assert (await _answer(dispatcher, "lookup_order", order_id="ORD-3")).result["total"] == 5.0


async def test_a_report_that_breaks_after_three_rows_returns_none_of_them(
    ledger: Ledger, dispatcher: Dispatcher
) -> None:
    for index, customer in enumerate(["a", "b", "c", "", "e"]):
        await ledger.add_order(f"ORD-{index}", customer, 1.0 + index)
    answer = await _answer(dispatcher, "export_report")
    assert (answer.outcome, answer.reason_code, answer.result) == ("failed", "corrupt_order", None)


async def test_a_posting_records_its_call_and_its_reconcile_step_finds_it(
    ledger: Ledger, dispatcher: Dispatcher
) -> None:
    arguments = {"account": "sales-eu", "memo": "m1"}
    before = await _answer(dispatcher, "journal", "posting_status", **arguments)
    assert (before.result["resolution"], before.result["effect_id"]) == ("not_run", None)
    done = await _answer(dispatcher, "journal", "post", **arguments)
    assert done.outcome == "ok" and [e.call_key for e in await ledger.journal()] == ["a1-00:key-1"]
    found = await _answer(dispatcher, "journal", "posting_status", **arguments)
    assert found.result["resolution"] == "ran" and "1 posting(s) on sales-eu" in found.result["note"]
    assert await ledger.entries_of("a1-00:other") == []
