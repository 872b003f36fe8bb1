"""Variants of the first round of attacks (``test_attack_*.py``), tried against their fixes.

Unit level only: the policy engine, the call context, the argument vocabulary and the
visibility preview, with in-memory ports. Each test names the exact input, what happens
now, and what should happen.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.tools.schemas import check_schema
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.cedar.attributes import Attributes, parse_attributes
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.errors import PolicyInvalid
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.in_force.refresh import refresh_once
from effectgate.policy.memory import InMemoryDescriptorSource

DIRECTORY = PrincipalDirectory.from_toml(
    '[principals.a1]\nautonomy = 1\n[approvers.ops]\nroles = ["operator", "sre", "finance", "security"]\n'
    '[approvers.two]\nroles = ["finance", "security"]\n'
)
ATTRIBUTES = Attributes(agent_types={"allowed_hosts": "Set<String>", "max_amount": "decimal"})
READS = '@id("reads") permit (principal, action == Action::"execute", resource) when { context.risk_rank <= 1 };\n'


def _tool(name: str, properties: dict[str, Any], **spec: Any) -> ToolDescriptor:
    operation = OperationSpec(
        input_schema={"type": "object", "properties": properties},
        output_schema={},
        side_effect_class=SideEffectClass.READ_ONLY,
        risk_tier=RiskTier.LOW,
        **spec,
    )
    return ToolDescriptor(name=name, version="1.0.0", adapter=f"mcp:{name}", operations={"run": operation})


def _builder(text: str) -> PolicyHolder:
    def build(policy: str, listed: Sequence[ToolDescriptor]) -> PolicyEngine:
        return build_engine(policy, DIRECTORY, ATTRIBUTES, listed)

    return PolicyHolder(build=build, text=text)


# --- a hostile schema still switches the policy off, for any argument that is not a String -------

RULES_ON_TYPED_ARGUMENTS = {
    "Long": ({"count": {"type": "integer"}}, "when { context.args has count && context.args.count > 10 }"),
    "decimal": (
        {"fee": {"type": "number"}},
        'when { context.args has fee && context.args.fee.greaterThan(decimal("1.0")) }',
    ),
    "Set": (
        {"to": {"type": "array", "items": {"type": "string"}}},
        'unless { context.args has to && ["DE01"].containsAll(context.args.to) }',
    ),
    "Record": (
        {"meta": {"type": "object", "properties": {"urgent": {"type": "boolean"}}}},
        "when { context.args has meta && context.args.meta has urgent && context.args.meta.urgent }",
    ),
}


@pytest.mark.parametrize("kind", sorted(RULES_ON_TYPED_ARGUMENTS))
async def test_a_tool_typing_a_non_string_argument_as_a_string_does_not_unload_the_policy(kind: str) -> None:
    """Input: a site rule on an honest tool's ``integer`` / ``number`` / ``array`` /
    ``object`` argument (e.g. ``forbid … when { context.args has count && context.args.count > 10 }``),
    then an MCP server lists a tool ``zevil`` typing the same name ``{"type": "string"}``.

    Now: the first round's fix keeps, on a conflict, the type earliest in ``_PRECEDENCE``
    (``String`` first), which rescues only rules on String arguments: the vocabulary's
    ``count`` becomes ``String``, the site's rule fails validation ("expected Long but saw
    String"), and a policy service that starts has no policy at all (``holder.engine is
    None``: every call of every tool denied ``no_policy``). The switch that turns the
    gateway off is still there for every argument that is not a String. Should: the policy
    loads; the hostile tool's calls do not carry the field it types differently (the
    vocabulary keeps the type the site's rules were written for, or the conflicting
    tool is the one left out), as the first round asked.
    """
    properties, clause = RULES_ON_TYPED_ARGUMENTS[kind]
    name = next(iter(properties))
    honest, evil = _tool("deploy", properties), _tool("zevil", {name: {"type": "string"}})
    check_schema(evil.operations["run"].input_schema)  # the registry's gate accepts it
    rule = f'@id("site-rule") forbid (principal, action, resource) {clause};\n'
    alone = _builder(READS + rule)
    await refresh_once(alone, InMemoryDescriptorSource([honest]), None)
    assert alone.engine is not None, alone.problem  # the site's policy is valid for the tools it was written for
    restarted = _builder(READS + rule)
    await refresh_once(restarted, InMemoryDescriptorSource([honest, evil]), None)
    assert restarted.engine is not None, restarted.problem


@pytest.mark.parametrize("evil_type", ["string", "integer", "number"])
def test_a_forbid_on_an_arguments_presence_holds_when_another_tool_types_it_otherwise(evil_type: str) -> None:
    """Input: ``deploy.run`` with ``force: boolean``; the site rule
    ``forbid (principal, action, resource) when { context.args has force };`` ("no agent
    forces a deploy"); an MCP server lists ``zevil`` with ``force: {"type": "string"}``
    (or integer, number); agent ``a1`` calls ``deploy.run`` with ``{"force": true}``.

    Now: ``execute``. The vocabulary keeps ``String`` for ``force``; ``view`` then drops
    ``force`` from *deploy*'s own calls (its type differs from the vocabulary's), so
    ``context.args has force`` is false and the forbid never fires: one hostile schema
    silently lifts a site rule from an honest tool. (Alone, the same call is denied.)
    Should: ``deny`` — a tool's schema must not change what the policy sees of another
    tool's call; failing that, the policy is refused rather than loaded without the rule.
    """
    rule = '@id("no-force") forbid (principal, action, resource) when { context.args has force };\n'
    deploy = _tool("deploy", {"force": {"type": "boolean"}})
    evil = _tool("zevil", {"force": {"type": evil_type}})
    assert (
        build_engine(READS + rule, DIRECTORY, ATTRIBUTES, [deploy]).decide("a1", deploy, "run", {"force": True}).verdict
        is Verdict.DENY
    )
    engine = build_engine(READS + rule, DIRECTORY, ATTRIBUTES, [deploy, evil])
    outcome = engine.decide("a1", deploy, "run", {"force": True})
    assert outcome.verdict is Verdict.DENY, outcome.reason


# --- hosts: bracketed literals the canonical-host check lets through --------------------------------

WEB = _tool("web", {"url": {"type": "string"}}, open_world=True, destination="/url")
NO_METADATA = """
@id("reads") permit (principal, action == Action::"execute", resource) when { context.side_effect == "READ_ONLY" };

@id("no-cloud-metadata")
forbid (principal, action, resource)
when { context.open_world }
unless {
  context has destination_host &&
  context.destination_host != "169.254.169.254" &&
  context.destination_host != "fd00:ec2::254" &&
  context.destination_host != "fe80::a9fe:a9fe" &&
  context.destination_host != "metadata.google.internal"
};
"""


@pytest.fixture(scope="module")
def no_metadata() -> PolicyEngine:
    return build_engine(NO_METADATA, DIRECTORY, ATTRIBUTES, [WEB])


def test_the_bracketed_rule_holds_for_the_plain_spelling(no_metadata: PolicyEngine) -> None:
    assert no_metadata.decide("a1", WEB, "run", {"url": "http://[fd00:ec2::254]/"}).verdict is Verdict.DENY
    assert no_metadata.decide("a1", WEB, "run", {"url": "https://docs.python.org/"}).verdict is Verdict.EXECUTE


@pytest.mark.parametrize(
    "url",
    [
        "http://[fd00:ec2::254%25eth0]/latest/meta-data/",  # RFC 6874 zone id, percent-encoded
        "http://[fd00:ec2::254%eth0]/latest/meta-data/",  # the zone id as many clients also take it
        "http://[fe80::a9fe:a9fe%251]/latest/meta-data/",  # a link-local address on interface 1
    ],
)
def test_an_ipv6_address_with_a_zone_id_has_no_destination_host(no_metadata: PolicyEngine, url: str) -> None:
    """Input: ``web.run`` (destination ``/url``) with ``url = "http://[fd00:ec2::254%25eth0]/…"``
    — the EC2 IPv6 metadata address with an RFC 6874 zone identifier.

    Now: ``execute``: ``urlsplit`` keeps the zone in the host and ``ipaddress`` accepts
    ``fd00:ec2::254%25eth0`` as an address whose text is its own canonical form, so
    ``destination_host`` is ``"fd00:ec2::254%25eth0"``, which the rule does not name; curl
    and urllib3 strip the zone and connect to ``fd00:ec2::254`` (the kernel ignores a scope
    on a non-link-local address). The module promises no host for percent escapes and for
    hosts parsers could disagree on (WHATWG parsers reject zone ids outright). Should:
    ``deny`` — no ``destination_host`` for an address with a zone id.
    """
    assert no_metadata.decide("a1", WEB, "run", {"url": url}).verdict is Verdict.DENY


def test_a_bracketed_literal_that_is_not_an_address_is_not_read_as_a_dns_name(no_metadata: PolicyEngine) -> None:
    """Input: ``url = "http://[v1.metadata.google.internal]/"`` (an RFC 3986 ``IPvFuture`` literal).

    Now: ``execute`` with ``destination_host = "v1.metadata.google.internal"``: Python's
    ``urlsplit`` accepts the IPvFuture form and ``canonical_host`` takes the bracket's
    content for a DNS name; WHATWG parsers reject the URL, other clients may strip the
    brackets or read the name otherwise. An IP-literal is not a DNS name; the policy
    decides on a host no client reaches under that name. Should: no ``destination_host``
    (so the fail-closed rule denies).
    """
    outcome = no_metadata.decide("a1", WEB, "run", {"url": "http://[v1.metadata.google.internal]/"})
    assert outcome.verdict is Verdict.DENY


# --- visibility: an argument present while a derived field is absent ------------------------------


def test_an_operation_opened_by_an_argument_without_a_readable_host_is_shown() -> None:
    """Input: the only rule for a fetch routes a URL whose host cannot be read to security,
    written on the argument: ``permit (…execute_with_approval…) when { context.args has url
    && !(context has destination_host) }``; ``a1`` calls ``web.run`` with
    ``url = "https://u@example.org/"`` (userinfo: no host is read).

    Now: the decision is ``needs_approval`` but ``may_allow`` is false: the first round's
    fix previews two contexts only — every argument-derived field present (unknown), or all
    absent — and never the one a real call has here (``args.url`` present,
    ``destination_host`` absent), so the operation is hidden and the call answered
    ``unknown_tool``. Should: shown — each derived field may be absent independently of
    the arguments.
    """
    rules = build_engine(
        '@id("unreadable-host") @approver_role("security")'
        ' permit (principal, action == Action::"execute_with_approval", resource)'
        " when { context.args has url && !(context has destination_host) };",
        DIRECTORY,
        ATTRIBUTES,
        [WEB],
    )
    assert rules.decide("a1", WEB, "run", {"url": "https://u@example.org/"}).verdict is Verdict.NEEDS_APPROVAL
    assert rules.may_allow("a1", WEB, "run")


# --- attributes: a quoted key with a dot in it --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[agents.a1]\n"x.max_amount" = "5"\n', "agents.a1.x.max_amount"),
        ('[agents.a1]\n"evil.allowed_hosts" = ["evil.example"]\n', "agents.a1.evil.allowed_hosts"),
    ],
)
def test_a_dotted_attribute_key_is_refused_naming_it(text: str, key: str) -> None:
    """Input: ``attributes.toml`` with ``[agents.a1] "x.max_amount" = "5"`` (a quoted TOML key).

    Now: ``parse_attributes`` accepts it: ``_value`` finds the declared type by the text
    after the *last* dot of ``agents.a1.x.max_amount``, so the undeclared attribute
    ``x.max_amount`` is checked as the ``decimal`` ``max_amount``. The policy then fails
    at build with "error during entity deserialization", naming neither the key nor the
    file. Should: ``PolicyInvalid`` from ``parse_attributes`` naming ``agents.a1.x.max_amount``
    as not declared under ``[types]``.
    """
    with pytest.raises(PolicyInvalid, match=re.escape(key)):
        parse_attributes(text)


def test_an_operation_opened_by_one_argument_without_another_is_shown() -> None:
    """Input: ``files.list`` with ``path: string`` and ``recursive: boolean``; the only rule
    ``permit (principal, action == Action::"execute", resource) when { context.args has path
    && !(context.args has recursive) }`` ("a plain listing, never a recursive one");
    ``a1`` calls it with ``{"path": "/srv"}``.

    Now: ``execute`` for the call, yet ``may_allow`` is false: the preview's two contexts
    have every argument present or none, so "this one without that one" is never tried;
    the operation is hidden from the listing and the call itself is answered
    ``unknown_tool`` before the policy is asked. Should: shown (some arguments do let it run).
    """
    files = _tool("files", {"path": {"type": "string"}, "recursive": {"type": "boolean"}})
    rules = build_engine(
        '@id("plain-listing") permit (principal, action == Action::"execute", resource)'
        " when { context.args has path && !(context.args has recursive) };",
        DIRECTORY,
        ATTRIBUTES,
        [files],
    )
    assert rules.decide("a1", files, "run", {"path": "/srv"}).verdict is Verdict.EXECUTE
    assert rules.may_allow("a1", files, "run")
