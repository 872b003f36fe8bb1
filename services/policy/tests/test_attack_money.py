"""Attacks on the money rules: amounts the shipped policy means to stop, and amounts that crash it.

Each test names the exact input, what happens now, and what should happen.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.cedar.attributes import parse_attributes
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.errors import PolicyInvalid
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.service import Envelope, PolicyPorts
from effectgate.shared.mcp.mapping import McpToolInfo, descriptor_from_mcp
from effectgate.shared.mcp.servers import McpServerConfig, Override

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DIRECTORY = PrincipalDirectory.from_toml(
    '[principals.a1]\nautonomy = 1\n[approvers.fin1]\nroles = ["finance"]\n[approvers.fin2]\nroles = ["finance"]\n'
    '[approvers.ops]\nroles = ["operator", "sre", "security"]\n[approvers.sec]\nroles = ["security"]\n'
)
ATTRIBUTES = parse_attributes('[agents.a1]\nmax_amount = "1000.00"\n')
PAY = {
    "type": "object",
    "properties": {
        "recipient": {"type": "string"},
        "amount": {"type": "number"},
        "currency": {"type": "string"},
        "fee": {"type": "number"},
    },
    "required": ["recipient", "amount"],
}


def _op(**kw: Any) -> OperationSpec:
    return OperationSpec(
        input_schema=PAY,
        output_schema={},
        side_effect_class=SideEffectClass.FINANCIAL,
        risk_tier=RiskTier.LOW,
        **kw,
    )


BANK = ToolDescriptor(name="bank", version="1.0.0", adapter="none", operations={"send_money": _op(amount="/amount")})


@pytest.fixture(scope="module")
def shipped(repo_root: Path) -> PolicyEngine:
    text = (repo_root / "deploy/policy/policy.cedar").read_text(encoding="utf-8")
    return build_engine(text, DIRECTORY, ATTRIBUTES, [BANK])


# --- a huge number crashes the decision instead of being refused --------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        {"recipient": "DE01", "amount": 1e24},  # the amount (context.amount)
        {"recipient": "DE01", "amount": 1, "fee": 1e24},  # any other number argument (context.args.fee)
    ],
)
def test_a_number_of_25_digits_or_more_is_refused_not_raised(shipped: PolicyEngine, arguments: dict[str, Any]) -> None:
    """Input: ``amount`` (or any ``number`` argument) = ``1e24``.

    Now: ``engine.decide`` raises ``decimal.InvalidOperation``: ``cedar_decimal`` quantizes
    to 4 places (29 significant digits, beyond the default 28-digit context) before it
    checks the range. Should: ``deny`` / ``argument_untypable`` naming the pointer, as
    ``1e20`` is ("is beyond the range of a Cedar decimal"); ``decide`` promises never to raise.
    """
    outcome = shipped.decide("a1", BANK, "send_money", arguments)
    assert (outcome.verdict, outcome.reason_code) == (Verdict.DENY, "argument_untypable")


async def test_a_huge_amount_gets_a_clear_refusal_from_the_pipeline(shipped: PolicyEngine) -> None:
    """Input: a tool request with ``"amount": 1e24`` (a valid JSON number, 4 bytes).

    Now: ``domain.decide`` ("never raises for anything the request contains") raises, so
    the consumer retries the message until it gives up with ``policy_fault`` — one agent
    can keep the policy service busy with redeliveries. Should: ``refuse`` /
    ``argument_untypable`` at once.
    """
    ports = PolicyPorts(
        policy=PolicyHolder(shipped),
        descriptors=InMemoryDescriptorSource([BANK]),
        limiter=InMemoryRateLimiter(),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=65536,
    )
    body = {
        "type": "tool.requested",
        "event_id": "e1",
        "occurred_at": "2026-11-30T12:00:00Z",
        "request_id": "r1",
        "tool": "bank",
        "operation": "send_money",
        "arguments": {"recipient": "DE01", "amount": 1e24},
        "idempotency_key": "k1",
    }
    decision = await decide(Envelope(principal="a1", data=msgspec.json.encode(body), request_id="r1"), ports)
    assert (decision.verdict, decision.reason_code) == (Verdict.REFUSE, "argument_untypable")


@pytest.mark.parametrize("value", ['"1e30"', "1e30"])
def test_a_huge_max_amount_in_the_attributes_file_is_refused_naming_it(value: str) -> None:
    """Input: ``attributes.toml`` with ``[agents.a1] max_amount = "1e30"`` (careless operator).

    Now: ``decimal.InvalidOperation`` escapes ``parse_attributes``; the policy service's
    start-up catches only ``PolicyInvalid`` and the like, so it crashes at start instead of
    reporting NOT READY. Should: ``PolicyInvalid`` naming ``agents.a1.max_amount``.
    """
    with pytest.raises(PolicyInvalid, match="agents.a1.max_amount"):
        parse_attributes(f"[agents.a1]\nmax_amount = {value}\n")


# --- amounts the limit does not stop -------------------------------------------------------------


@pytest.mark.parametrize("amount", [-1_000_000, -922337203685477])
def test_a_negative_amount_beyond_the_limit_is_not_approvable(shipped: PolicyEngine, amount: int) -> None:
    """Input: ``send_money`` with ``amount = -1000000`` for an agent whose ``max_amount`` is 1000.00.

    Now: ``needs_approval`` by two ``finance`` approvers (``-1000000 <= 1000``): the
    shipped limit compares the signed number, so "above the agent's limit nobody can
    approve it" holds only for positive amounts, and a tool that reads a negative amount
    as a debit, a reversal or a refund moves a million. Should: denied (``forbidden``):
    the limit bounds the size of the amount, or a negative amount opens no permit.
    """
    outcome = shipped.decide("a1", BANK, "send_money", {"recipient": "DE01", "amount": amount})
    assert outcome.verdict is Verdict.DENY, outcome.reason


# --- an amount given as a string is read more leniently than tools read it ------------------------

NESTED = {
    "type": "object",
    "properties": {"payment": {"type": "object", "properties": {"amount": {"type": "string"}}}},
}
PAY_BY_STRING = ToolDescriptor(
    name="psp",
    version="1.0.0",
    adapter="none",
    operations={
        "charge": OperationSpec(
            input_schema=NESTED,
            output_schema={},
            side_effect_class=SideEffectClass.FINANCIAL,
            risk_tier=RiskTier.LOW,
            amount="/payment/amount",
        )
    },
)


@pytest.mark.parametrize(
    ("spelling", "a_tool_may_read"),
    [
        ("100000e-2", "100000 (JavaScript parseInt, C atoi/strtol stop at the e)"),
        ("1_000", "1 (parseFloat) or an error"),
        ("\u0661\u0660\u0660\u0660", "an error, or 1000 only where Unicode digits are read"),
        (" 1000 ", "an error in a strict parser"),
    ],
    ids=["exponent", "underscore", "arabic-indic-digits", "spaces"],
)
def test_a_string_amount_the_tools_may_read_another_way_is_refused(
    shipped: PolicyEngine, spelling: str, a_tool_may_read: str
) -> None:
    """Input: ``psp.charge`` (amount pointer ``/payment/amount``, a string, as many payment
    APIs take it) with ``{"payment": {"amount": "100000e-2"}}``; ``max_amount = "1000.00"``.

    Now: ``needs_approval``: ``decimal.Decimal`` accepts exponents, ``_`` separators,
    non-ASCII digits and surrounding spaces, so the policy judges 1000 while a tool that
    parses the string its own way charges ``a_tool_may_read``. The URL rule of the same
    module refuses to read a host parsers could disagree on; the amount has no such rule.
    Should: ``argument_untypable`` for a string that is not a plain decimal
    (``-?[0-9]+(\\.[0-9]+)?``), so the policy decides only on a number every parser reads alike.
    """
    outcome = shipped.decide("a1", PAY_BY_STRING, "charge", {"payment": {"amount": spelling}})
    assert (outcome.verdict, outcome.reason_code) == (Verdict.DENY, "argument_untypable"), a_tool_may_read


@pytest.mark.parametrize("spelling", ["Infinity", "NaN", "-inf"])
def test_a_string_amount_that_is_no_finite_number_is_refused_for_that_reason(
    shipped: PolicyEngine, spelling: str
) -> None:
    """Input: ``{"payment": {"amount": "Infinity"}}``.

    Now: refused, but "has more than 4 decimal places (a Cedar decimal holds 4)", which
    names the wrong problem. Should: "is not a finite number" (a refusal names what was wrong).
    """
    outcome = shipped.decide("a1", PAY_BY_STRING, "charge", {"payment": {"amount": spelling}})
    assert outcome.reason_code == "argument_untypable"
    assert "decimal places" not in outcome.reason, outcome.reason


# --- the servers-file line of docs/how-to/write-policies.md alone leaves the limit unapplied ---


def test_an_operation_with_an_amount_pointer_is_held_to_the_limit_whatever_its_class(repo_root: Path) -> None:
    """Input: the policy guide's own servers-file line for an MCP bank,
    ``[servers.bank.overrides.send_money] amount = "/amount"`` (no ``side_effect_class``),
    the shipped ``deploy/policy`` files, and ``ops-agent`` (autonomy 2, ``max_amount = "100.00"``)
    calling ``mcp_bank.send_money`` with ``amount = 1000000``.

    Now: the server is untrusted, so the tool is ``IRREVERSIBLE_WRITE`` / ``high`` (the
    default); the shipped money rules are keyed on ``side_effect == "FINANCIAL"``, so the
    amount is read and ignored: ``needs_approval`` by *one* ``operator`` (policy
    ``irreversible-write-approval``) for a million, ten thousand times the agent's limit.
    Should: denied (``forbid-amount-above-limit``): an operation that names an amount
    is held to the agent's limit whatever its class — or an ``amount`` pointer on a
    non-FINANCIAL operation is refused when the servers file is loaded.
    """
    config = McpServerConfig(name="bank", command="/bin/true", overrides={"send_money": Override(amount="/amount")})
    tool = McpToolInfo(name="send_money", description="", input_schema=PAY)
    bank = descriptor_from_mcp(config, "1.0.0", [tool])
    policy = repo_root / "deploy/policy"
    directory = PrincipalDirectory.from_toml((policy / "principals.toml").read_text(encoding="utf-8"))
    attributes = parse_attributes((policy / "attributes.toml").read_text(encoding="utf-8"))
    engine = build_engine((policy / "policy.cedar").read_text(encoding="utf-8"), directory, attributes, [bank])
    outcome = engine.decide("ops-agent", bank, "send_money", {"recipient": "DE01", "amount": 1_000_000})
    assert outcome.verdict is Verdict.DENY, (outcome.reason, outcome.approver_role)
