"""Wrappers: the last registered outermost; surface ones see no caller; one wrapper sees both kinds of call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools import Dispatcher, Invocation, ListingCap, Refusal, Toolbox, tool
from tools.tests.support import Progress, call_of

READ = SideEffectClass.READ_ONLY


@tool(side_effect=READ, risk=RiskTier.LOW)
async def whole(n: int) -> list[int]:
    return list(range(n))


@tool(side_effect=READ, risk=RiskTier.LOW)
async def streamed(n: int) -> AsyncIterator[int]:
    for item in range(n):
        yield item


BOX = Toolbox([whole, streamed], worker="w")


class Recording:
    """Records entering and leaving, the context it saw and each item."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    async def __call__(self, invocation: Invocation) -> Any:
        seen = invocation.context.principal if invocation.context else "nobody"
        self.log.append(f"{self.name} in ({seen})")
        invocation.on_item(self.item)
        result = await invocation.run()
        self.log.append(f"{self.name} out {result}")
        return result

    async def item(self, item: Any) -> None:
        self.log.append(f"{self.name} item {item}")


async def test_the_last_registered_wrapper_is_outermost_and_surface_wrappers_are_outside_caller_ones() -> None:
    log: list[str] = []
    dispatcher = Dispatcher(
        BOX,
        surface=[Recording("s1", log), Recording("s2", log)],
        caller=[Recording("c1", log), Recording("c2", log)],
    )
    answer = await dispatcher.answer(call_of(BOX, "whole", n=2), Progress())
    assert answer.result == [0, 1]
    assert log == [
        "s2 in (nobody)", "s1 in (nobody)", "c2 in (alice)", "c1 in (alice)",
        "c1 out [0, 1]", "c2 out [0, 1]", "s1 out [0, 1]", "s2 out [0, 1]",
    ]  # fmt: skip


async def test_one_wrapper_sees_a_streaming_call_s_items_and_its_collected_result() -> None:
    log: list[str] = []
    dispatcher = Dispatcher(BOX, caller=[Recording("c", log)])
    answer = await dispatcher.answer(call_of(BOX, "streamed", n=2), Progress())
    assert answer.result == [0, 1]
    assert log == ["c in (alice)", "c item 0", "c item 1", "c out [0, 1]"]


async def test_a_caller_wrapper_refusing_runs_nothing() -> None:
    ran: list[int] = []

    async def budget(invocation: Invocation) -> Any:
        if invocation.context is not None and invocation.context.principal == "alice":
            raise Refusal("budget_exhausted", "alice spent her budget")
        ran.append(1)
        return await invocation.run()

    answer = await Dispatcher(BOX, caller=[budget]).answer(call_of(BOX, "whole", n=1), Progress())
    assert (answer.outcome, answer.reason_code) == ("refused", "budget_exhausted") and ran == []


async def test_a_listing_cap_serves_at_most_its_limit_and_refuses_the_rest() -> None:
    dispatcher = Dispatcher(BOX, surface=[ListingCap(1)])
    assert [served.tool for served in dispatcher.served()] == ["streamed"]
    answer = await dispatcher.answer(call_of(BOX, "whole", n=1), Progress())
    assert (answer.outcome, answer.reason_code) == ("refused", "unknown_tool")
