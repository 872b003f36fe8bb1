"""A streaming operation's result is the array of its items; a failure part way leaves nothing partial."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools import Dispatcher, Fault, Refusal, Toolbox, running, tool
from tools.tests.support import Progress, call_of


@tool(side_effect=SideEffectClass.READ_ONLY, risk=RiskTier.LOW)
async def rows(n: int, fail_at: int = -1, pause_s: float = 0.0) -> AsyncIterator[dict[str, int]]:
    for item in range(n):
        if item == fail_at:
            raise RuntimeError("the cursor was lost")
        await asyncio.sleep(pause_s)
        yield {"row": item}


@tool(side_effect=SideEffectClass.REVERSIBLE_WRITE, risk=RiskTier.LOW)
async def apply(n: int, fail_at: int = -1) -> AsyncIterator[int]:
    for item in range(n):
        if item == fail_at:
            raise RuntimeError("the link dropped")
        yield item


@tool(side_effect=SideEffectClass.REVERSIBLE_WRITE, risk=RiskTier.LOW)
async def picky(n: int) -> AsyncIterator[int]:
    if n < 0:
        raise Refusal("negative", "n is at least 0")
    if n == 0:
        raise Fault("empty", "nothing to do", retryable=True)
    yield n


BOX = Toolbox([rows, apply, picky], worker="w")
DISPATCHER = Dispatcher(BOX)


async def test_the_result_is_the_array_of_items_and_progress_is_reported() -> None:
    progress = Progress()
    answer = await DISPATCHER.answer(call_of(BOX, "rows", n=3), progress)
    assert (answer.outcome, answer.result) == ("ok", [{"row": 0}, {"row": 1}, {"row": 2}])
    assert progress.reports[0] == (1, "") and progress.reports[-1] == (3, "")


async def test_progress_is_reported_for_each_item_when_items_come_slower_than_the_interval(monkeypatch) -> None:
    monkeypatch.setattr(running, "PROGRESS_INTERVAL_S", 0.0)
    progress = Progress()
    await DISPATCHER.answer(call_of(BOX, "rows", n=3), progress)
    assert progress.reports == [(1, ""), (2, ""), (3, "")]


async def test_fast_items_are_reported_at_most_once_per_interval() -> None:
    progress = Progress()
    await DISPATCHER.answer(call_of(BOX, "rows", n=200), progress)
    assert progress.reports[0] == (1, "") and progress.reports[-1] == (200, "") and len(progress.reports) < 10


async def test_a_read_failing_part_way_is_failed_with_no_partial_result() -> None:
    answer = await DISPATCHER.answer(call_of(BOX, "rows", n=5, fail_at=2), Progress())
    assert (answer.outcome, answer.result, answer.reason_code) == ("failed", None, "tool_error")
    assert "after 2 items" in answer.reason and "the cursor was lost" in answer.reason


async def test_a_write_failing_part_way_is_uncertain_with_no_partial_result() -> None:
    answer = await DISPATCHER.answer(call_of(BOX, "apply", n=5, fail_at=3), Progress())
    assert (answer.outcome, answer.result) == ("uncertain", None)


async def test_a_refusal_or_fault_before_the_first_item_keeps_its_meaning() -> None:
    refused = await DISPATCHER.answer(call_of(BOX, "picky", n=-1), Progress())
    failed = await DISPATCHER.answer(call_of(BOX, "picky", n=0), Progress())
    assert (refused.outcome, refused.reason_code) == ("refused", "negative")
    assert (failed.outcome, failed.reason_code, failed.retryable) == ("failed", "empty", True)


async def test_a_stream_past_its_deadline_is_failed_with_nothing_partial() -> None:
    answer = await DISPATCHER.answer(call_of(BOX, "rows", deadline_s=0.2, n=100, pause_s=0.05), Progress())
    assert (answer.outcome, answer.reason_code, answer.result) == ("failed", "tool_timeout", None)


async def test_a_progress_report_that_fails_ends_nothing() -> None:
    async def broken(items: int, message: str) -> None:
        raise ConnectionError("bus gone")

    answer = await DISPATCHER.answer(call_of(BOX, "rows", n=2), broken)
    assert (answer.outcome, answer.result) == ("ok", [{"row": 0}, {"row": 1}])
