"""A tool class is built once per call with its dependencies and disposed after it; a listing builds nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools import Context, DeclarationError, Dependencies, Dispatcher, Provided, Toolbox, operation, tool
from tools.tests.support import Progress, call_of

events: list[str] = []


class Database:
    def __init__(self, name: str) -> None:
        self.name = name


class Clock:
    pass


@asynccontextmanager
async def open_database() -> AsyncIterator[Database]:
    events.append("db opened")
    try:
        yield Database("main")
    finally:
        events.append("db closed")


async def make_clock() -> Clock:
    return Clock()


@tool(side_effect=SideEffectClass.READ_ONLY, risk=RiskTier.LOW)
class Reports:
    def __init__(self, database: Database, context: Context) -> None:
        events.append(f"built for {context.principal}")
        self.database = database

    @operation
    async def name(self, clock: Provided[Clock]) -> str:
        events.append("ran")
        assert isinstance(clock, Clock)
        return self.database.name

    @operation
    async def crash(self) -> str:
        raise RuntimeError("lost")

    async def aclose(self) -> None:
        events.append("instance closed")


def dependencies() -> Dependencies:
    return Dependencies().provide(Database, open_database).provide(Clock, make_clock)


def test_a_listing_builds_no_instance_and_resolves_no_dependency() -> None:
    events.clear()
    box = Toolbox([Reports], worker="w")
    box.descriptors()
    Dispatcher(box, dependencies=dependencies()).served()
    assert events == []


async def test_each_call_builds_its_own_instance_and_disposes_it_when_it_ends() -> None:
    events.clear()
    box = Toolbox([Reports], worker="w")
    dispatcher = Dispatcher(box, dependencies=dependencies())
    first = await dispatcher.answer(call_of(box, "reports", "name"), Progress())
    assert first.result == "main"
    assert events == ["db opened", "built for alice", "ran", "instance closed", "db closed"]
    await dispatcher.answer(call_of(box, "reports", "name"), Progress())
    assert events.count("built for alice") == 2 and events.count("instance closed") == 2


async def test_an_instance_is_disposed_when_its_call_fails() -> None:
    events.clear()
    box = Toolbox([Reports], worker="w")
    answer = await Dispatcher(box, dependencies=dependencies()).answer(call_of(box, "reports", "crash"), Progress())
    assert answer.outcome == "failed"
    assert events[-2:] == ["instance closed", "db closed"]


@tool(side_effect=SideEffectClass.READ_ONLY, risk=RiskTier.LOW)
class Managed:
    async def __aenter__(self) -> Managed:
        events.append("entered")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        events.append("exited")

    @operation
    async def run(self) -> int:
        events.append("ran")
        return 1


@tool(side_effect=SideEffectClass.READ_ONLY, risk=RiskTier.LOW)
class Closing:
    @operation
    async def run(self) -> int:
        return 1

    def close(self) -> None:
        events.append("closed")


async def test_an_instance_is_disposed_by_its_context_manager_exit_or_its_close() -> None:
    events.clear()
    box = Toolbox([Managed, Closing], worker="w")
    dispatcher = Dispatcher(box)
    await dispatcher.answer(call_of(box, "managed"), Progress())
    await dispatcher.answer(call_of(box, "closing"), Progress())
    assert events == ["entered", "ran", "exited", "closed"]


def test_a_dependency_no_one_provides_is_refused_at_start_up() -> None:
    with pytest.raises(DeclarationError, match=r"reports\.__init__: parameter 'database' needs a"):
        Dispatcher(Toolbox([Reports], worker="w"))


async def test_a_dependency_that_fails_is_a_retryable_failure_and_the_tool_does_not_run() -> None:
    events.clear()

    def broken() -> Database:
        raise ConnectionError("database down")

    box = Toolbox([Reports], worker="w")
    dispatcher = Dispatcher(box, dependencies=Dependencies().provide(Database, broken).provide(Clock, make_clock))
    answer = await dispatcher.answer(call_of(box, "reports", "name"), Progress())
    assert (answer.outcome, answer.reason_code, answer.retryable) == ("failed", "dependency_unavailable", True)
    assert "database down" in answer.reason and events == []
