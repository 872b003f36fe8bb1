"""Policies that read a call's arguments: typing, refusal at load, absent fields, limits, open world."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import ToolRequested, encode
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.cedar.args_schema import Vocabulary
from effectgate.policy.cedar.attributes import parse_attributes
from effectgate.policy.cedar.engine import PolicyEngine, PolicyOutcome
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.errors import PolicyInvalid
from effectgate.policy.handlers.requests import decide as domain_decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.service import Envelope, PolicyPorts

SE, RT = SideEffectClass, RiskTier
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
E, A, D = Verdict.EXECUTE, Verdict.NEEDS_APPROVAL, Verdict.DENY
DIRECTORY = PrincipalDirectory.from_toml(
    "[principals.a1]\nautonomy = 1\n[principals.a2]\nautonomy = 2\n[principals.poor]\nautonomy = 1\n"
    '[approvers.fin1]\nroles = ["finance", "operator"]\n[approvers.fin2]\nroles = ["finance", "security"]\n'
    '[approvers.sec]\nroles = ["security", "sre"]\n'
)
ATTRIBUTES = parse_attributes(
    '[types.agent]\nallowed_recipients = "Set<String>"\n'
    '[agents.a1]\nallowed_recipients = ["DE01", "DE02"]\nmax_amount = "1000.00"\nallowed_hosts = ["docs.python.org"]\n'
    "[agents.a2]\nmax_amount = 50\n"
)
SEND = {
    "type": "object",
    "properties": {
        "recipient": {"type": "string"},
        "amount": {"type": "number"},
        "note": {"type": "string"},
        "count": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object", "properties": {"urgent": {"type": "boolean"}}},
        "password": {"type": "string", "writeOnly": True},
        "either": {"type": ["string", "null"]},
    },
}
FETCH = {"type": "object", "properties": {"url": {"type": "string"}}}


def op(schema: dict[str, Any], side_effect: SideEffectClass, **kw: Any) -> OperationSpec:
    return OperationSpec(input_schema=schema, output_schema={}, side_effect_class=side_effect, risk_tier=RT.LOW, **kw)


BANK = ToolDescriptor(
    name="bank",
    version="1.0.0",
    adapter="mcp:bank",
    operations={
        "send_money": op(SEND, SE.FINANCIAL, amount="/amount"),
        "refund": op(SEND, SE.FINANCIAL),  # names no amount
        "update_password": op(SEND, SE.SECURITY_SENSITIVE),
    },
)
WEB = ToolDescriptor(
    name="web",
    version="1.0.0",
    adapter="mcp:web",
    operations={
        "fetch": op(FETCH, SE.READ_ONLY, open_world=True, destination="/url"),
        "local": op(FETCH, SE.READ_ONLY),
    },
)


@pytest.fixture(scope="module")
def shipped(repo_root_path: Path) -> PolicyEngine:
    text = (repo_root_path / "deploy/policy/policy.cedar").read_text(encoding="utf-8")
    return build_engine(text, DIRECTORY, ATTRIBUTES, [BANK, WEB])


@pytest.fixture(scope="module")
def repo_root_path(pytestconfig: pytest.Config) -> Path:
    return Path(pytestconfig.rootpath)


def engine(rules: str) -> PolicyEngine:
    return build_engine(rules, DIRECTORY, ATTRIBUTES, [BANK, WEB])


def decide(e: PolicyEngine, principal: str, descriptor: ToolDescriptor, operation: str, **args: Any) -> PolicyOutcome:
    return e.decide(principal, descriptor, operation, args)


# --- the generated schema -------------------------------------------------------------------


def test_arguments_are_typed_from_the_input_schemas_and_what_cannot_be_typed_is_said() -> None:
    vocabulary = Vocabulary.of([("bank.send_money", SEND)])
    types = {name: typed.kind for name, typed in vocabulary.attributes}
    assert types == {
        "recipient": "String",
        "amount": "decimal",
        "note": "String",
        "count": "Long",
        "tags": "Set",
        "meta": "Record",
    }
    assert any("password: a secret argument" in note for note in vocabulary.notes)
    assert any("either: no single type" in note for note in vocabulary.notes)


def test_a_name_two_tools_type_differently_keeps_one_type_and_says_so() -> None:
    other = {"type": "object", "properties": {"amount": {"type": "integer"}, "recipient": {"type": "object"}}}
    vocabulary = Vocabulary.of([("a.pay", SEND), ("b.pay", other), ("c.pay", SEND)])
    kept = dict(vocabulary.attributes)
    assert (kept["amount"].kind, kept["recipient"].kind) == ("decimal", "String"), "fixed precedence, any order"
    assert any("args.amount: typed decimal and Long" in note for note in vocabulary.notes), vocabulary.notes
    assert Vocabulary.of([("c.pay", SEND), ("b.pay", other)]).attributes == vocabulary.attributes


@pytest.mark.parametrize(
    ("rule", "fragment"),
    [
        ('context.args has iban && context.args.iban == "x"', "never provides"),  # has on a field no tool has
        ('context.args.iban == "x"', "not found"),  # read of a field no tool has
        ('context.args.recipient == "x"', "optional attribute"),  # optional fields need `has`
        ('context.args has password && context.args.password == "x"', "never provides"),  # secrets are not given
        ("context has amount && context.amount < 5", "decimal"),  # a decimal compares by method
    ],
)
def test_a_rule_that_could_never_hold_or_is_unsafe_is_refused_at_load(rule: str, fragment: str) -> None:
    with pytest.raises(PolicyInvalid, match=fragment):
        engine(f'@id("r") permit (principal, action == Action::"execute", resource) when {{ {rule} }};')


# --- rules on arguments ----------------------------------------------------------------------

ALLOW_LISTED = """
@id("allow-listed-recipient") permit (principal, action == Action::"execute", resource)
when { context.args has recipient && principal has allowed_recipients
       && principal.allowed_recipients.contains(context.args.recipient) };
"""


def test_an_allow_listed_recipient_runs_and_any_other_or_none_is_denied() -> None:
    rules = engine(ALLOW_LISTED)
    assert decide(rules, "a1", BANK, "refund", recipient="DE02").verdict is E
    assert decide(rules, "a1", BANK, "refund", recipient="GB99").verdict is D
    assert decide(rules, "a1", BANK, "refund").verdict is D  # omitting the field opens nothing
    assert decide(rules, "a2", BANK, "refund", recipient="DE02").verdict is D  # a2 has no allow-list


def test_like_nested_records_sets_and_longs_reach_the_policy() -> None:
    rules = engine(
        '@id("r") permit (principal, action == Action::"execute", resource) when {'
        ' context.args has note && context.args.note like "inv-*" &&'
        " context.args has meta && context.args.meta has urgent && !context.args.meta.urgent &&"
        ' context.args has tags && context.args.tags.contains("ok") &&'
        " context.args has count && context.args.count <= 3 };"
    )
    good = {"note": "inv-7", "meta": {"urgent": False}, "tags": ["ok", "ok"], "count": 3}
    assert rules.decide("a1", BANK, "refund", good).verdict is E
    for changed in ({"note": "x-7"}, {"meta": {"urgent": True}}, {"tags": ["no"]}, {"count": 4}, {"meta": {}}):
        assert rules.decide("a1", BANK, "refund", {**good, **changed}).verdict is D, changed


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"amount": 0.00001}, "/amount: has more than 4 decimal places"),
        ({"amount": 1e20}, "/amount: is beyond the range"),
        ({"count": 2**63}, "/count: is not an integer of at most 64 bits"),
    ],
)
def test_a_value_cedar_cannot_hold_exactly_is_not_decided(arguments: dict[str, Any], fragment: str) -> None:
    outcome = engine(ALLOW_LISTED).decide("a1", BANK, "send_money", arguments)
    assert (outcome.verdict, outcome.reason_code) == (D, "argument_untypable")
    assert fragment in outcome.reason


# --- the shipped policy: money, secrets, open world ---------------------------------------------


@pytest.mark.parametrize(
    ("principal", "amount", "expected"),
    [
        ("a1", 1, (A, "approval_required")),
        ("a1", 999.99, (A, "approval_required")),
        ("a1", 1000, (A, "approval_required")),  # exactly at the limit
        ("a1", 1000.0001, (D, "forbidden")),
        ("a1", 5000, (D, "forbidden")),
        ("a2", 50.0, (A, "approval_required")),
        ("a2", 50.0001, (D, "forbidden")),
        ("poor", 1, (D, "forbidden")),  # no max_amount for this agent
        ("a1", -1, (D, "forbidden")),
    ],
)
def test_money_moves_within_the_agents_limit_after_two_finance_approvals(
    shipped: PolicyEngine, principal: str, amount: float, expected: tuple[Verdict, str]
) -> None:
    outcome = decide(shipped, principal, BANK, "send_money", recipient="DE01", amount=amount)
    assert (outcome.verdict, outcome.reason_code) == expected, outcome.reason
    if outcome.verdict is A:
        assert (outcome.approver_role, outcome.approvals_required) == ("finance", 2)
    if outcome.reason_code == "forbidden":
        assert outcome.policy_ids in (("forbid-amount-above-limit",), ("forbid-negative-amount",))


def test_money_without_an_amount_is_denied(shipped: PolicyEngine) -> None:
    assert decide(shipped, "a1", BANK, "send_money", recipient="DE01").reason_code == "no_permit"
    assert decide(shipped, "a1", BANK, "refund", recipient="DE01", amount=1).reason_code == "no_permit"


def test_security_sensitive_needs_two_security_approvals(shipped: PolicyEngine) -> None:
    outcome = decide(shipped, "a1", BANK, "update_password")
    assert (outcome.verdict, outcome.approver_role, outcome.approvals_required) == (A, "security", 2)


@pytest.mark.parametrize(
    ("principal", "url", "expected"),
    [
        ("a1", "https://docs.python.org/3/", E),
        ("a1", "https://DOCS.python.org/3/", E),  # hosts compare in lower case
        ("a1", "https://attacker.example/?q=secret", A),
        ("a1", "https://docs.python.org@attacker.example/", A),  # the host is after the @
        ("a1", "https://user@docs.python.org/", A),  # userinfo: no host is read
        ("a1", "https://attacker.example\\@docs.python.org/", A),  # WHATWG reads attacker.example
        ("a1", "https://docs.python.org /x", A),
        ("a1", "https://docs.pyth\u03bfn.org/", A),  # a look-alike, non-ASCII
        ("a1", "https://docs.python.org:443/3/?q=1#f", E),
        ("a1", "not a url", A),
        ("poor", "https://docs.python.org/", A),  # no allow-list
        ("a2", "https://attacker.example/", E),  # autonomy 2 reads the open world on its own
    ],
)
def test_an_open_world_read_at_autonomy_1_needs_an_allow_listed_host_or_a_person(
    shipped: PolicyEngine, principal: str, url: str, expected: Verdict
) -> None:
    outcome = decide(shipped, principal, WEB, "fetch", url=url)
    assert outcome.verdict is expected, outcome.reason
    if expected is A:
        assert (outcome.approver_role, outcome.policy_ids) == ("operator", ("open-world-read-approval",))


def test_a_closed_world_read_runs_whatever_its_arguments(shipped: PolicyEngine) -> None:
    assert decide(shipped, "a1", WEB, "local", url="https://attacker.example/").verdict is E


# --- what an agent may see ----------------------------------------------------------------------


def test_an_operation_some_arguments_could_open_is_visible(shipped: PolicyEngine) -> None:
    assert shipped.may_allow("a1", BANK, "send_money")  # within the limit it could run
    assert shipped.may_allow("a1", WEB, "fetch")
    assert not shipped.may_allow("a1", BANK, "refund")  # no amount: nothing could open it
    assert not shipped.may_allow("nobody", WEB, "fetch")


def test_visibility_follows_forbids_that_hold_whatever_the_arguments() -> None:
    rules = engine(ALLOW_LISTED + '@id("f") forbid (principal, action, resource) when { principal.autonomy < 2 };')
    assert not rules.may_allow("a1", BANK, "refund")
    assert engine(ALLOW_LISTED).may_allow("a1", BANK, "refund")


# --- through the pipeline ----------------------------------------------------------------------


async def test_the_pipeline_refuses_a_value_the_policy_cannot_see_and_denies_with_the_rules_reason(
    shipped: PolicyEngine,
) -> None:
    ports = PolicyPorts(
        policy=PolicyHolder(shipped),
        descriptors=InMemoryDescriptorSource([BANK, WEB]),
        limiter=InMemoryRateLimiter(),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=65536,
    )

    async def call(operation: str, arguments: dict[str, Any], key: str) -> Any:
        tool = "web" if operation == "fetch" else "bank"
        request = ToolRequested(
            event_id=key,
            occurred_at=NOW,
            request_id=key,
            tool=tool,
            operation=operation,
            arguments=arguments,
            idempotency_key=key,
        )
        data = encode(request)
        return await domain_decide(Envelope(principal="a1", data=data, request_id=key), ports)

    untypable = await call("send_money", {"recipient": "DE01", "amount": 1.00001}, "k1")
    assert (untypable.verdict, untypable.reason_code) == (Verdict.REFUSE, "argument_untypable")
    over = await call("send_money", {"recipient": "DE01", "amount": 1000.5}, "k2")
    assert (over.verdict, over.reason_code, over.hidden_reason_code) == (D, "forbidden", None)  # visible, denied
    assert "above this agent's limit" in over.reason
    fetch = await call("fetch", {"url": "https://attacker.example/x"}, "k3")
    assert (fetch.verdict, fetch.policy_id) == (A, "open-world-read-approval")


@pytest.mark.parametrize(
    "url",
    [
        "https://attacker.example\\.python.org/",  # WHATWG: host attacker.example, path /.python.org
        "https://attacker.example\t.python.org/",
        "https://attacker.example .python.org/",
        "https://attacker.example\u3002python.org/",  # an ideographic full stop
    ],
)
def test_a_host_pattern_is_not_matched_by_a_url_parsers_read_two_ways(url: str) -> None:
    rules = engine(
        '@id("python-hosts") permit (principal, action == Action::"execute", resource)'
        ' when { context has destination_host && context.destination_host like "*.python.org" };'
    )
    assert decide(rules, "a1", WEB, "fetch", url="https://docs.python.org/").verdict is E
    assert decide(rules, "a1", WEB, "fetch", url=url).verdict is D
