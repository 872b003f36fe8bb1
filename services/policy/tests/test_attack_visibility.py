"""The listing and the call disagree, and a hidden tool's existence leaks.

Each test names the exact request, what happens now, and what should happen.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import ToolRequested, encode
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.cedar.attributes import parse_attributes
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.service import Envelope, PolicyPorts

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DIRECTORY = PrincipalDirectory.from_toml(
    '[principals.a1]\nautonomy = 1\n[approvers.ops]\nroles = ["operator", "sre", "finance", "security"]\n'
    '[approvers.two]\nroles = ["finance", "security"]\n'
)
ATTRIBUTES = parse_attributes(
    '[types.agent]\nallowed_recipients = "Set<String>"\n[agents.a1]\nallowed_recipients = ["DE01"]\n'
)
SE, RT = SideEffectClass, RiskTier


def _op(properties: dict[str, Any], side_effect: SideEffectClass, risk: RiskTier = RT.LOW) -> OperationSpec:
    schema = {"type": "object", "properties": properties}
    return OperationSpec(input_schema=schema, output_schema={}, side_effect_class=side_effect, risk_tier=risk)


GIT = ToolDescriptor(name="git", version="1.0.0", adapter="none", operations={"log": _op({}, SE.READ_ONLY)})
PAYMENTS = ToolDescriptor(  # nothing of it is callable by a1 under the shipped policy
    name="payments",
    version="1.0.0",
    adapter="none",
    operations={"refund": _op({"amount": {"type": "number"}}, SE.FINANCIAL)},  # names no amount pointer
)


def _request(tool: str, operation: str) -> bytes:
    return encode(
        ToolRequested(
            event_id="r1",
            occurred_at=NOW,
            request_id="r1",
            tool=tool,
            operation=operation,
            arguments={},
            idempotency_key="k1",
        )
    )


@pytest.fixture
def ports(repo_root: Path) -> PolicyPorts:
    text = (repo_root / "deploy/policy/policy.cedar").read_text(encoding="utf-8")
    return PolicyPorts(
        policy=PolicyHolder(build_engine(text, DIRECTORY, ATTRIBUTES, [GIT, PAYMENTS])),
        descriptors=InMemoryDescriptorSource([GIT, PAYMENTS]),
        limiter=InMemoryRateLimiter(),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=4096,
    )


async def test_a_made_up_operation_of_a_hidden_tool_answers_like_a_missing_tool(ports: PolicyPorts) -> None:
    """Input: agent ``a1`` calls ``payments.zzz`` (an operation nobody has), then ``paymentz.zzz``.

    Now: ``payments`` is hidden from ``a1`` (``payments.refund`` answers ``unknown_tool``
    "no tool 'payments' at version latest"), but ``payments.zzz`` answers
    ``unknown_operation`` "payments has no operation 'zzz'", while a tool that does not
    exist answers ``unknown_tool``: ``_resolve`` checks the operation name before
    visibility. An agent learns which hidden tools exist by guessing names with a made-up
    operation (and, with a pinned version, which versions exist). Should: the same code
    and text as for a missing tool (``unknown_tool``), as for the hidden tool's real operations.
    """
    real = await decide(Envelope("a1", _request("payments", "refund"), "r1"), ports)
    assert (real.reason_code, real.hidden_reason_code) == ("unknown_tool", "no_permit")  # hidden, as designed
    hidden = await decide(Envelope("a1", _request("payments", "zzz"), "r1"), ports)
    missing = await decide(Envelope("a1", _request("paymentz", "zzz"), "r1"), ports)
    assert (
        (hidden.verdict, hidden.reason_code) == (missing.verdict, missing.reason_code) == (Verdict.DENY, "unknown_tool")
    )
    assert hidden.reason == missing.reason.replace("paymentz", "payments")


def test_an_operation_no_arguments_can_open_is_not_shown() -> None:
    """Input: docs/how-to/write-policies.md's pattern "permit only when good" on an argument
    (``context.args has recipient && principal.allowed_recipients.contains(context.args.recipient)``),
    and a tool ``git.log`` whose input schema has no ``recipient``.

    Now: ``may_allow`` is true — partial evaluation makes ``context.args`` a whole unknown
    record, so it assumes ``recipient`` could be there — and ``git.log`` is listed; every
    call of it is then denied ``no_permit`` whatever its arguments, since the call's
    ``args`` hold only ``git.log``'s own properties. The listing says the operation is
    callable; no call is. (The same holds for an operation whose field is secret, or typed
    differently from the vocabulary.) Should: not listed, answered like a missing
    operation — the operation's own argument types are known when it is listed.
    """
    rules = build_engine(
        '@id("allow-listed") permit (principal, action == Action::"execute", resource) when {'
        " context.args has recipient && principal has allowed_recipients &&"
        " principal.allowed_recipients.contains(context.args.recipient) };",
        DIRECTORY,
        ATTRIBUTES,
        [
            GIT,
            ToolDescriptor(
                name="bank",
                version="1.0.0",
                adapter="none",
                operations={"pay": _op({"recipient": {"type": "string"}}, SE.READ_ONLY)},
            ),
        ],
    )
    assert rules.decide("a1", GIT, "log", {"recipient": "DE01"}).verdict is Verdict.DENY  # no call can run
    assert not rules.may_allow("a1", GIT, "log")


def test_an_operation_a_call_without_a_readable_host_could_open_is_shown() -> None:
    """Input: the only rule for open-world reads routes a URL whose host cannot be read to
    the security team: ``permit (…execute_with_approval…) when { context.open_world &&
    !(context has destination_host) }``; agent ``a1`` calls ``web.fetch`` with
    ``url = "https://u@example.org/"`` (userinfo: no host is read).

    Now: the full decision is ``needs_approval``, but ``may_allow`` is false — partial
    evaluation puts ``destination_host`` (and ``amount``) in the context as a present
    unknown, so ``context has destination_host`` is *true* there and the permit "cannot
    hold". The operation is hidden, and the call is answered ``unknown_tool`` before the
    policy is asked: a permit that the policy guide's "some arguments could let the agent run
    it" covers is dead. Should: listed; the call gets the policy's ``needs_approval``
    (an argument-derived field is unknown *and may be absent*).
    """
    fetch = OperationSpec(
        input_schema={"type": "object", "properties": {"url": {"type": "string"}}},
        output_schema={},
        side_effect_class=SE.READ_ONLY,
        risk_tier=RT.LOW,
        open_world=True,
        destination="/url",
    )
    web = ToolDescriptor(name="web", version="1.0.0", adapter="none", operations={"fetch": fetch})
    rules = build_engine(
        '@id("unreadable-host") @approver_role("security")'
        ' permit (principal, action == Action::"execute_with_approval", resource)'
        " when { context.open_world && !(context has destination_host) };",
        DIRECTORY,
        ATTRIBUTES,
        [web],
    )
    assert rules.decide("a1", web, "fetch", {"url": "https://u@example.org/"}).verdict is Verdict.NEEDS_APPROVAL
    assert rules.may_allow("a1", web, "fetch")
