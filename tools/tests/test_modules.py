"""A module as a worker serves it: its curated list or scanned tools, and the settings it declares."""

from __future__ import annotations

import types

import pytest

from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools import DeclarationError, Dependencies, Provided, dispatcher_for_module, tool, toolbox_for_module
from tools.tests.support import Progress, call_of


def test_a_curated_module_serves_only_its_list() -> None:
    assert sorted(toolbox_for_module("tools.tests.sample_tools.mail", "mail").tools) == ["send"]


def test_a_module_without_tools_is_refused_by_name() -> None:
    with pytest.raises(DeclarationError, match="empty_module declares no tool"):
        toolbox_for_module(types.ModuleType("empty_module"), "w")


def test_a_missing_module_is_said_as_such() -> None:
    with pytest.raises(ModuleNotFoundError):
        dispatcher_for_module("tools.tests.no_such_module", "w")


class Greeter:
    def __init__(self, greeting: str) -> None:
        self.greeting = greeting


async def test_the_module_dependencies_reach_its_tools() -> None:
    @tool(side_effect=SideEffectClass.READ_ONLY, risk=RiskTier.LOW)
    async def greet(name: str, greeter: Provided[Greeter]) -> str:
        return f"{greeter.greeting}, {name}"

    module = types.ModuleType("greetings")
    module.TOOLS = [greet]  # type: ignore[attr-defined]
    module.DEPENDENCIES = Dependencies().provide(Greeter, lambda: Greeter("hello"))  # type: ignore[attr-defined]
    dispatcher = dispatcher_for_module(module, "greeter")
    answer = await dispatcher.answer(call_of(toolbox_for_module(module, "greeter"), "greet", name="ada"), Progress())
    assert (answer.outcome, answer.result) == ("ok", "hello, ada")
