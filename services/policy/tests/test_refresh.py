"""The engine follows the registry: a policy reading new arguments builds once a tool provides them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.cedar.attributes import Attributes
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.in_force.refresh import refresh_once
from effectgate.policy.memory import InMemoryDescriptorSource

DIRECTORY = PrincipalDirectory.from_toml("[principals.a]\nautonomy = 1\n")
RULE = """@id("to-bob") permit (principal, action == Action::"execute", resource)
when { context.args has to && context.args.to == "bob" };"""


def tool(version: str, properties: dict[str, Any]) -> ToolDescriptor:
    spec = OperationSpec(
        input_schema={"type": "object", "properties": properties},
        output_schema={},
        side_effect_class=SideEffectClass.READ_ONLY,
        risk_tier=RiskTier.LOW,
    )
    return ToolDescriptor(name="mail", version=version, adapter="none", operations={"send": spec})


def build(text: str, listed: Sequence[ToolDescriptor]) -> PolicyEngine:
    return build_engine(text, DIRECTORY, Attributes(), listed)


class Registry(InMemoryDescriptorSource):
    def __init__(self) -> None:
        super().__init__([])
        self.failing = False

    def add(self, descriptor: ToolDescriptor) -> None:
        self._descriptors[(descriptor.name, descriptor.version)] = descriptor

    async def list(self) -> list[ToolDescriptor]:
        if self.failing:
            raise OSError("registry down")
        return await super().list()


async def test_a_policy_waits_for_the_tool_whose_arguments_it_reads_then_decides_on_them() -> None:
    registry, holder = Registry(), PolicyHolder(build=build, text=RULE)
    seen = await refresh_once(holder, registry, None)
    assert holder.engine is None and "to" in (holder.problem or "")
    assert not holder.readiness().ready

    registry.add(tool("1.0.0", {"to": {"type": "string"}}))
    seen = await refresh_once(holder, registry, seen)
    assert holder.engine is not None and holder.readiness().ready
    sent = tool("1.0.0", {"to": {"type": "string"}})
    assert holder.engine.decide("a", sent, "send", {"to": "bob"}).verdict is Verdict.EXECUTE
    assert holder.engine.decide("a", sent, "send", {"to": "eve"}).verdict is Verdict.DENY


async def test_a_registry_change_that_breaks_the_policy_leaves_the_engine_in_force() -> None:
    registry, holder = Registry(), PolicyHolder(build=build, text=RULE)
    registry.add(tool("1.0.0", {"to": {"type": "string"}}))
    seen = await refresh_once(holder, registry, None)
    before = holder.engine
    registry.add(tool("2.0.0", {"to": {"type": "integer"}}))  # latest now types `to` otherwise
    seen = await refresh_once(holder, registry, seen)
    assert holder.engine is before and "Long and String are not compatible" in (holder.problem or "")

    registry.failing = True  # an unreadable registry changes nothing either
    assert await refresh_once(holder, registry, seen) == seen and holder.engine is before
