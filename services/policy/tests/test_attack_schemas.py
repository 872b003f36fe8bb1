"""Attacks by a tool's input schema (a malicious MCP server controls its listing) on the policy's vocabulary.

The registry accepts these schemas (checked below with its gate, ``check_schema``);
each test names the exact schema, what happens now, and what should happen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.tools.schemas import check_schema
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.cedar.args_schema import Vocabulary
from effectgate.policy.cedar.attributes import Attributes
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.in_force.refresh import refresh_once
from effectgate.policy.memory import InMemoryDescriptorSource

DIRECTORY = PrincipalDirectory.from_toml("[principals.a1]\nautonomy = 1\n")
ATTRIBUTES = Attributes(agent_types={"allowed_hosts": "Set<String>", "max_amount": "decimal"})
READS = '@id("reads") permit (principal, action == Action::"execute", resource) when { context.risk_rank <= 1 };\n'
RECIPIENT_RULE = """
@id("transfers-to-allow-listed-recipients-only")
@reason("the recipient is not on this agent's allow-list")
forbid (principal is Agent, action, resource is Tool)
when { context.side_effect == "FINANCIAL" }
unless { context.args has recipient && context.args.recipient == "DE01" };
"""


def _tool(
    name: str, properties: dict[str, Any], side_effect: SideEffectClass = SideEffectClass.READ_ONLY
) -> ToolDescriptor:
    spec = OperationSpec(
        input_schema={"type": "object", "properties": properties},
        output_schema={},
        side_effect_class=side_effect,
        risk_tier=RiskTier.LOW,
    )
    return ToolDescriptor(name=name, version="1.0.0", adapter=f"mcp:{name}", operations={"run": spec})


GIT = _tool("git", {"path": {"type": "string"}})
BANK = _tool("bank", {"recipient": {"type": "string"}}, SideEffectClass.FINANCIAL)


def _builder(listed_text: str) -> PolicyHolder:
    def build(text: str, listed: Sequence[ToolDescriptor]) -> PolicyEngine:
        return build_engine(text, DIRECTORY, ATTRIBUTES, listed)

    return PolicyHolder(build=build, text=listed_text)


@pytest.mark.parametrize("name", ["a\x01b", "a\x08b", "a\x00b", "tab\x0c"])
async def test_a_property_name_with_a_control_character_does_not_stop_the_policy(name: str) -> None:
    """Input: an MCP server lists a tool whose input schema has a property named ``"a\\u0001b"``.

    Now: the registry stores it; the policy service renders the name into the Cedar
    schema with ``json.dumps`` (``"a\\u0001b"``), an escape Cedar does not know, and
    ``cedarpy.Schema.from_str`` raises ``ValueError`` — not ``PolicyInvalid`` — so
    ``PolicyHolder.rebuild`` ("never raises") raises, ``refresh_once`` raises: at start the
    policy service crashes (every call waits), and later the ``follow_registry`` task dies
    silently and the policy never follows the registry again. Should: the name is left out
    of the vocabulary (a note says so) or rendered with Cedar's own escapes (``\\u{1}``), and
    the policy loads; every other tool is decided as before.
    """
    evil = _tool("evil", {name: {"type": "string"}})
    check_schema(evil.operations["run"].input_schema)  # the registry's gate accepts it
    holder = _builder(READS)
    await refresh_once(holder, InMemoryDescriptorSource([GIT, evil]), None)
    assert holder.engine is not None, holder.problem
    assert holder.engine.decide("a1", GIT, "run", {"path": "x"}).verdict is Verdict.EXECUTE


async def test_a_tool_typing_an_argument_another_way_does_not_unload_the_policy() -> None:
    """Input: docs/how-to/write-policies.md's worked example 1 (reads ``context.args.recipient``), then an MCP
    server lists a tool ``mail`` whose ``recipient`` is ``{"type": "object", ...}`` (or an
    integer, or an array: anything but a string).

    Now: the name is "typed differently" and dropped from the whole vocabulary, so the
    site's policy no longer validates ("never provides"). A running service keeps the old
    engine (and refuses every policy change the operator makes from then on); a service
    that starts (restart, deploy, crash) has *no* policy and denies every call of every
    tool (``no_policy``) until the hostile tool is removed. One registered schema is a
    switch that turns the gateway off. Should: the policy loads; the conflicting tool's
    calls just do not carry the field it types differently (so a rule on it fails closed
    for that tool), and the conflict is named in the notes.
    """
    mail = _tool("mail", {"recipient": {"type": "object", "properties": {"address": {"type": "string"}}}})
    check_schema(mail.operations["run"].input_schema)
    holder = _builder(READS + RECIPIENT_RULE)
    await refresh_once(holder, InMemoryDescriptorSource([GIT, BANK]), None)
    assert holder.engine is not None, holder.problem  # the site's policy loads over the tools it was written for
    restarted = _builder(READS + RECIPIENT_RULE)
    await refresh_once(restarted, InMemoryDescriptorSource([GIT, BANK, mail]), None)
    assert restarted.engine is not None, restarted.problem
    assert restarted.engine.decide("a1", GIT, "run", {"path": "x"}).verdict is Verdict.EXECUTE


def test_a_nested_name_typed_two_ways_is_named_in_the_notes() -> None:
    """Input: two tools whose ``meta.urgent`` is a boolean in one and a string in the other.

    Now: ``urgent`` leaves the ``meta`` record silently (``_merge`` passes a throw-away
    conflicts list), although the policy guide promises that the service "logs, at load, each
    argument it left out and why". A rule on ``context.args.meta.urgent`` then fails with
    "never provides" and nothing says which tool took it away. Should: a note naming
    ``meta.urgent`` and both tools, like a top-level conflict gets.
    """
    one = {"type": "object", "properties": {"meta": {"type": "object", "properties": {"urgent": {"type": "boolean"}}}}}
    two = {"type": "object", "properties": {"meta": {"type": "object", "properties": {"urgent": {"type": "string"}}}}}
    vocabulary = Vocabulary.of([("a@1.0.0.run", one), ("b@1.0.0.run", two)])
    assert any("urgent" in note for note in vocabulary.notes), vocabulary.notes
