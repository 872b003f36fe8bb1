"""What a caller sees is what it may call; a hidden tool or operation answers like a missing one."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import ToolRequested, encode
from effectgate.contracts.tools.descriptors import OperationSpec, RateLimit, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.handlers.listings import get_for, principal_of
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.in_force.tool_listing import list_for
from effectgate.policy.in_force.visibility import visible_operations
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.service import Envelope, PolicyPorts

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SE, RT = SideEffectClass, RiskTier
SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"], "additionalProperties": False}
DIRECTORY = """
[principals.a1]
autonomy = 1
[principals.a2]
autonomy = 2
[principals.a3]
autonomy = 3
[approvers.alice]
roles = ["operator", "sre", "finance", "security"]
[approvers.bob]
roles = ["finance", "security"]
"""


def op(side_effect: SideEffectClass, risk: RiskTier = RT.LOW) -> OperationSpec:
    return OperationSpec(input_schema=SCHEMA, output_schema={}, side_effect_class=side_effect, risk_tier=risk)


def tool(name: str, version: str = "1.0.0", **operations: OperationSpec) -> ToolDescriptor:
    return ToolDescriptor(
        name=name,
        version=version,
        adapter="none",
        operations=operations,
        timeout_s=5,
        rate_limit=RateLimit(calls=5, period_s=60),
    )


TOOLS = [
    tool("git", log=op(SE.READ_ONLY), commit=op(SE.REVERSIBLE_WRITE), reset=op(SE.IRREVERSIBLE_WRITE, RT.HIGH)),
    tool("deploy", release=op(SE.PRODUCTION, RT.HIGH)),
    tool("payments", refund=op(SE.FINANCIAL), balance=op(SE.READ_ONLY, RT.MEDIUM)),
    tool("vault", rotate=op(SE.SECURITY_SENSITIVE, RT.CRITICAL)),
    tool("vault", "2.0.0", peek=op(SE.READ_ONLY, RT.TRIVIAL)),
]


@pytest.fixture
def ports(repo_root: Path) -> PolicyPorts:
    return _ports(PolicyEngine(_policy_text(repo_root), PrincipalDirectory.from_toml(DIRECTORY)))


def _policy_text(repo_root: Path) -> str:
    return (repo_root / "deploy/policy/policy.cedar").read_text(encoding="utf-8")


def _ports(engine: PolicyEngine | None) -> PolicyPorts:
    return PolicyPorts(
        policy=PolicyHolder(engine),
        descriptors=InMemoryDescriptorSource(TOOLS),
        limiter=InMemoryRateLimiter(),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=4096,
    )


def _call(tool_name: str, operation: str, arguments: Any = None, version: str | None = None) -> bytes:
    return encode(
        ToolRequested(
            event_id="r1",
            occurred_at=NOW,
            request_id="r1",
            tool=tool_name,
            operation=operation,
            arguments={"x": 1} if arguments is None else arguments,
            idempotency_key="k1",
            version=version,
        )
    )


async def _listing(principal: str, ports: PolicyPorts) -> dict[str, set[str]]:
    reply = await list_for(principal, ports)
    assert reply.ok, reply
    return {d.name: set(d.operations) for d in reply.descriptors or []}


@pytest.mark.parametrize(
    ("principal", "expected"),
    [
        ("a1", {"git": {"log", "commit"}, "deploy": {"release"}, "vault": {"peek"}}),
        ("a2", {"git": {"log", "commit", "reset"}, "deploy": {"release"}, "vault": {"peek"}}),
        ("a3", {"git": {"log", "commit", "reset"}, "deploy": {"release"}, "vault": {"peek"}}),
        ("stranger", {}),
    ],
)
async def test_listing_shows_only_what_the_policy_lets_the_principal_call(
    ports: PolicyPorts, principal: str, expected: dict[str, set[str]]
) -> None:
    """Irreversible at autonomy 1, financial, medium-risk reads: hidden; approval-needing: shown."""
    assert await _listing(principal, ports) == expected


async def test_listing_and_call_agree_on_every_operation(ports: PolicyPorts) -> None:
    assert ports.policy.engine is not None
    for principal in ("a1", "a2", "a3"):
        for descriptor in TOOLS:
            shown = visible_operations(ports.policy.engine, principal, descriptor)
            for operation in descriptor.operations:
                env = Envelope(principal, _call(descriptor.name, operation, version=descriptor.version), "r1")
                verdict = (await decide(env, ports)).verdict
                assert (operation in shown) is (verdict in (Verdict.EXECUTE, Verdict.NEEDS_APPROVAL))


@pytest.mark.parametrize(
    ("principal", "hidden", "missing", "policy_code"),
    [
        ("a1", ("git", "reset", None), ("git", "rebase", None), "no_permit"),
        ("a1", ("payments", "refund", None), ("nothing", "refund", None), "no_permit"),  # no amount to judge
        ("a1", ("payments", "balance", None), ("nothing", "balance", None), "no_permit"),
        ("a2", ("vault", "rotate", "1.0.0"), ("vaulx", "rotate", "1.0.0"), "forbidden"),
        ("a3", ("payments", "refund", None), ("nothing", "refund", None), "no_permit"),
    ],
)
async def test_a_hidden_call_is_answered_like_a_missing_one(
    ports: PolicyPorts,
    principal: str,
    hidden: tuple[str, str, str | None],
    missing: tuple[str, str, str | None],
    policy_code: str,
) -> None:
    """Same verdict, code and text (modulo names), even with arguments its schema refuses."""
    answers = []
    for name, operation, version in (hidden, missing):
        for arguments in ({"x": 1}, {"x": "not an integer"}, {}):
            env = Envelope(principal, _call(name, operation, arguments, version), "r1")
            answers.append(await decide(env, ports))
    shown = [msgspec.structs.replace(d, hidden_reason_code=None, hidden_reason=None) for d in answers]
    names = ((hidden[0], "T"), (missing[0], "T"), (hidden[1], "O"), (missing[1], "O"))
    texts = {(d.verdict, d.reason_code, _renamed(d.reason, names)) for d in shown}
    assert len(texts) == 1 and next(iter(texts))[1] in ("unknown_tool", "unknown_operation"), texts
    assert {d.request for d in answers} == {None} and {d.request_hash for d in answers} == {None}
    assert {d.hidden_reason_code for d in answers[:3]} == {policy_code}, "the decision keeps the policy's reason"
    assert {d.hidden_reason_code for d in answers[3:]} == {None}


def _renamed(text: str, names: tuple[tuple[str, str], ...]) -> str:
    for old, new in names:
        text = text.replace(f"'{old}'", new).replace(f"{old} ", f"{new} ")
    return text


async def test_get_answers_a_hidden_tool_like_a_missing_one(ports: PolicyPorts) -> None:
    hidden = await get_for("a1", b'{"tool": "payments"}', ports)
    missing = await get_for("a1", b'{"tool": "paymentz"}', ports)
    assert msgspec.json.encode(hidden).replace(b"payments", b"T") == msgspec.json.encode(missing).replace(
        b"paymentz", b"T"
    )
    assert (hidden.ok, hidden.reason_code) == (False, "unknown_tool")


async def test_get_shows_only_callable_operations_and_versions(ports: PolicyPorts) -> None:
    git = await get_for("a1", b'{"tool": "git"}', ports)
    assert git.ok and git.descriptor is not None and set(git.descriptor.operations) == {"log", "commit"}
    old = await get_for("a2", b'{"tool": "vault", "version": "1.0.0"}', ports)
    assert (old.ok, old.reason) == (False, "no tool 'vault' at version 1.0.0")
    latest = await get_for("a2", b'{"tool": "vault", "version": null}', ports)
    assert latest.descriptor is not None and latest.descriptor.version == "2.0.0"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"not json", "malformed"),
        (b'{"tool": "git", "admin": true}', "malformed"),
        (b'{"tool": "git.1.0.0"}', "invalid_tool"),
        (b'{"tool": "*"}', "invalid_tool"),
        (b'{"tool": "git", "version": "latest"}', "invalid_version"),
    ],
)
async def test_get_refuses_a_lookup_that_cannot_name_a_tool(ports: PolicyPorts, body: bytes, code: str) -> None:
    reply = await get_for("a1", body, ports)
    assert (reply.ok, reply.reason_code) == (False, code) and reply.reason


async def test_without_a_policy_nothing_is_listed_and_every_call_says_no_policy() -> None:
    ports = _ports(None)
    assert await _listing("a1", ports) == {}
    assert (await get_for("a1", b'{"tool": "git"}', ports)).reason_code == "unknown_tool"
    for name in ("git", "nothing"):
        decision = await decide(Envelope("a1", _call(name, "log"), "r1"), ports)
        assert (decision.verdict, decision.reason_code) == (Verdict.DENY, "no_policy")


async def test_an_unknown_principal_learns_nothing_about_which_tools_exist(ports: PolicyPorts) -> None:
    codes = {(await decide(Envelope("ghost", _call(n, "log"), "r1"), ports)).reason_code for n in ("git", "nothing")}
    assert codes == {"unknown_principal"}


async def test_a_registry_fault_fails_the_listing_closed(ports: PolicyPorts) -> None:
    class Broken(InMemoryDescriptorSource):
        async def list(self) -> list[ToolDescriptor]:
            raise TimeoutError("the KV bucket did not answer")

        async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
            raise TimeoutError("the KV bucket did not answer")

    broken = PolicyPorts(**{**ports.__dict__, "descriptors": Broken([])})
    assert (await list_for("a1", broken)).reason_code == "registry_unavailable"
    assert (await get_for("a1", b'{"tool": "git"}', broken)).reason_code == "registry_unavailable"


def test_the_principal_is_the_subjects_last_token() -> None:
    assert principal_of("tg.tools.list.a1") == "a1" and principal_of("tg.tools.get.demo-agent") == "demo-agent"
