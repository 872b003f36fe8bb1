"""A careless operator's policy that loads and silently never matches.

Each test names the exact policy and registry, what happens now, and what should happen.
"""

from __future__ import annotations

from pathlib import Path

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.cedar.attributes import parse_attributes
from effectgate.policy.cedar.loading import build_engine

PAY = {"type": "object", "properties": {"recipient": {"type": "string"}, "amount": {"type": "number"}}}
BANK = ToolDescriptor(  # an MCP bank registered without the servers file's `amount = "/amount"`
    name="mcp_bank",
    version="1.0.0",
    adapter="mcp:bank",
    operations={
        "send_money": OperationSpec(
            input_schema=PAY,
            output_schema={},
            side_effect_class=SideEffectClass.FINANCIAL,
            risk_tier=RiskTier.LOW,
        )
    },
)


def test_a_rule_on_the_amount_when_no_tool_names_an_amount_is_reported(repo_root: Path) -> None:
    """Input: the shipped policy (``financial-within-limit-approval`` reads ``context.amount``)
    over a registry whose only FINANCIAL operation names no ``amount`` pointer (the
    operator set ``side_effect_class = "FINANCIAL"`` but forgot ``amount = "/amount"``).

    Now: the policy loads without a word; ``context.amount`` is always in the schema, so
    docs/how-to/write-policies.md's promise — a rule reading something no registered tool provides "is
    refused at load, not left to never match" — does not reach it: the permit never
    holds, the bank is hidden from every agent, and only the audit's ``no_permit`` says
    why. (``destination_host`` is the same.) Should: at least a note at load, logged like
    the vocabulary's notes: no registered operation names an ``amount``, so the policies
    reading ``context.amount`` never match (refusing the text would break a fresh
    install, whose registry names no amount yet).
    """
    policy = repo_root / "deploy/policy"
    engine = build_engine(
        (policy / "policy.cedar").read_text(encoding="utf-8"),
        PrincipalDirectory.from_toml((policy / "principals.toml").read_text(encoding="utf-8")),
        parse_attributes((policy / "attributes.toml").read_text(encoding="utf-8")),
        [BANK],
    )
    assert engine.decide("ops-agent", BANK, "send_money", {"recipient": "x", "amount": 1}).verdict is Verdict.DENY
    assert any("amount" in note for note in engine.notes), engine.notes
