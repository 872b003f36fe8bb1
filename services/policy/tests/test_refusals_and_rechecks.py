"""Values no hash can carry, replays that must pass the policy again, and re-checks at the moment of effect."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.errors import IndexLost
from effectgate.contracts.events import DecisionMade, request_identity
from effectgate.contracts.integrity.signing import sign_event, verify_event
from effectgate.contracts.rpc.recheck import RecheckQuery
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.loading import load_policy
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.pipeline.recheck import recheck
from effectgate.policy.ports import ReplayState
from effectgate.policy.service import Envelope, PolicyPorts, fault_denial

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
KEY = Ed25519PrivateKey.generate()
WRITE = {"path": "a.txt", "content": "x"}

APPROVERS = '[approvers.alice]\nroles = ["operator", "sre", "finance", "security"]\n'
APPROVERS += '[approvers.bob]\nroles = ["finance", "security"]\n'
"""Approvers of every role the shipped policy names (a policy naming a role nobody holds does not load)."""


@pytest.fixture
def file_system(repo_root: Path) -> ToolDescriptor:
    data = (repo_root / "deploy" / "tools" / "file_system.json").read_bytes()
    return msgspec.json.decode(data, type=ToolDescriptor)


@pytest.fixture
def engine(repo_root: Path) -> PolicyEngine:
    return load_policy(repo_root / "deploy/policy/policy.cedar", repo_root / "deploy/policy/principals.toml")


@pytest.fixture
def ports(engine: PolicyEngine, file_system: ToolDescriptor) -> PolicyPorts:
    return PolicyPorts(
        policy=PolicyHolder(engine),
        descriptors=InMemoryDescriptorSource([file_system]),
        limiter=InMemoryRateLimiter(),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=1_000_000,
    )


def _body(arguments: Any, **fields: Any) -> bytes:
    body = {
        "type": "tool.requested",
        "event_id": "r1",
        "occurred_at": NOW.isoformat(),
        "request_id": "r1",
        "tool": "file_system",
        "operation": "read",
        "arguments": arguments,
        "idempotency_key": "k1",
        **fields,
    }
    return msgspec.json.encode(body)


def _env(data: bytes, principal: str = "demo-agent") -> Envelope:
    return Envelope(principal=principal, data=data, request_id=request_identity(data, None, 3))


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("arguments", "pointer"),
    [
        ({"path": 9007199254740993}, "/arguments/path"),
        ({"path": -9007199254740993}, "/arguments/path"),
        ({"path": "a", "n": [1, 2, {"deep": 2**70}]}, "/arguments/n/2/deep"),
        ({"path": _nested(200)}, "/arguments/path/0/0/0"),
        ({"path": "a", "x/y": {"~": 10**30}}, "/arguments/x~1y/~0"),
    ],
    ids=["above", "below", "nested", "too-deep", "escaped-pointer"],
)
async def test_values_without_a_canonical_form_are_refused_naming_the_path(
    ports: PolicyPorts, arguments: Any, pointer: str
) -> None:
    decision = await decide(_env(_body(arguments)), ports)
    assert (decision.verdict, decision.reason_code) == (Verdict.REFUSE, "unrepresentable_value"), decision.reason
    assert pointer in decision.reason
    assert verify_event(sign_event(decision, KEY), KEY.public_key()), "the refusal itself must be signable"


RAW_FLAWS = {
    "lone-surrogate": (b'{"path": "a\\ud800b"}', "/arguments/path: string is not valid Unicode"),
    "lone-low-surrogate-deep": (b'{"path": "a", "o": {"l": [1, "\\udc00"]}}', "/arguments/o/l/1: string is not valid"),
    "lone-surrogate-in-a-name": (b'{"path": "a", "k": {"\\udfff": 1}}', "/arguments/k: object key is not valid"),
    "infinity": (b'{"path": 1e400}', "/arguments/path: NaN and infinity"),
    "infinity-in-a-list": (b'{"path": "a", "opts": {"list": [1, 1e400]}}', "/arguments/opts/list/1: NaN and"),
    "negative-infinity": (b'{"path": "a", "n": [-1e999]}', "/arguments/n/0: NaN and infinity"),
    "nan": (b'{"path": NaN}', "/arguments/path: NaN and infinity"),
    "infinity-literal": (b'{"path": "a", "x~/y": -Infinity}', "/arguments/x~0~1y: NaN and infinity"),
    "invalid-utf8": (b'{"path": "\xff\xfe.txt"}', "/arguments/path: invalid UTF-8 (byte "),
    "invalid-utf8-in-a-name": (b'{"path": "a", "o": {"\xc3(": 1}}', "/arguments/o: invalid UTF-8 (byte "),
    "too-deep-for-the-decoder": (b'{"path": "a", "d": ' + b"[" * 5000 + b"]" * 5000 + b"}", "/arguments/d/0/0/0/0"),
    "syntax-error": (b'{"path": "a", "n": [1, tru]}', "/arguments/n/1: not JSON"),
    "integer-of-5000-digits": (b'{"path": "a", "n": [1, ' + b"9" * 5000 + b"]}", "/arguments/n/1: integer beyond"),
}


@pytest.mark.parametrize("name", list(RAW_FLAWS))
async def test_raw_values_no_hash_can_carry_are_refused_by_the_decoder_naming_the_pointer(
    ports: PolicyPorts, name: str
) -> None:
    """JSON text whose value has no canonical form is refused as malformed before anything hashes it."""
    raw_arguments, pointer = RAW_FLAWS[name]
    body = _body({"path": "a.txt"}).replace(b'{"path":"a.txt"}', raw_arguments)
    assert raw_arguments in body
    decision = await decide(_env(body), ports)
    assert (decision.verdict, decision.reason_code) == (Verdict.REFUSE, "malformed"), decision.reason
    assert decision.reason.startswith(f"request value at {pointer}"), decision.reason
    assert "$." not in decision.reason and "(byte" not in decision.reason.split(": ", 1)[0]
    assert verify_event(sign_event(decision, KEY), KEY.public_key()), "the refusal itself must be signable"


async def test_the_largest_exact_integer_is_accepted_and_hashed(ports: PolicyPorts) -> None:
    decision = await decide(_env(_body({"path": "a.txt"}, idempotency_key=str(2**53 - 1))), ports)
    assert decision.verdict is Verdict.EXECUTE
    refused = await decide(_env(_body({"path": 2**53 - 1})), ports)
    assert refused.reason_code == "schema_invalid", "a safe integer reaches schema validation"


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"tool": "a.b"}, "invalid_tool"),
        ({"tool": ">"}, "invalid_tool"),
        ({"tool": "File"}, "invalid_tool"),
        ({"version": "1.0"}, "invalid_version"),
        ({"version": "*"}, "invalid_version"),
    ],
)
async def test_names_that_can_never_exist_are_refused_before_the_registry(
    ports: PolicyPorts, fields: dict[str, Any], code: str
) -> None:
    class Unreachable:
        async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
            raise AssertionError("the registry was asked")

    ports = PolicyPorts(**{**ports.__dict__, "descriptors": Unreachable()})
    decision = await decide(_env(_body({"path": "a"}, **fields)), ports)
    assert (decision.verdict, decision.reason_code) == (Verdict.REFUSE, code)


async def _completed(ports: PolicyPorts, principal: str = "ops-agent") -> PolicyPorts:
    first = await decide(_env(_body(WRITE, operation="write"), principal), ports)
    assert first.request_hash is not None
    done = {(principal, "k1"): ReplayState(done=True, fingerprint=first.request_hash)}
    return PolicyPorts(**{**ports.__dict__, "replays": InMemoryReplayIndex(done)})


async def test_a_replay_reaches_only_a_caller_the_current_policy_still_allows(
    ports: PolicyPorts, engine: PolicyEngine
) -> None:
    replaying = await _completed(ports)
    again = await decide(_env(_body(WRITE, operation="write", request_id="r2"), "ops-agent"), replaying)
    assert (again.verdict, again.reason_code) == (Verdict.EXECUTE, "idempotent_replay")

    directory = PrincipalDirectory.from_toml('[principals.other]\nautonomy = 1\nroles = ["agent"]\n' + APPROVERS)
    removed = PolicyPorts(
        **{**replaying.__dict__, "policy": PolicyHolder(PolicyEngine(_policy_text(engine), directory))}
    )
    gone = await decide(_env(_body(WRITE, operation="write", request_id="r3"), "ops-agent"), removed)
    assert (gone.verdict, gone.reason_code) == (Verdict.DENY, "unknown_principal")

    forbid = (
        _policy_text(engine)
        + '\n@id("no-writes")\nforbid (principal, action, resource) when { context.operation == "write" };\n'
    )
    forbidden = PolicyPorts(**{**replaying.__dict__, "policy": PolicyHolder(PolicyEngine(forbid, engine.directory))})
    denied = await decide(_env(_body(WRITE, operation="write", request_id="r4"), "ops-agent"), forbidden)
    assert (denied.verdict, denied.reason_code, denied.hidden_reason_code) == (
        Verdict.DENY,
        "unknown_operation",
        "forbidden",
    )


async def test_replays_use_up_the_rate_limit(ports: PolicyPorts, file_system: ToolDescriptor) -> None:
    replaying = await _completed(ports)
    codes = [
        (await decide(_env(_body(WRITE, operation="write", request_id=f"n{n}"), "ops-agent"), replaying)).reason_code
        for n in range(file_system.rate_limit.calls + 1)
    ]
    assert codes[-1] == "rate_limited" and codes.count("idempotent_replay") == file_system.rate_limit.calls - 1


async def test_a_lost_index_is_a_transient_fault_not_a_decision(ports: PolicyPorts) -> None:
    class Lost:
        async def lookup(self, principal: str, idempotency_key: str) -> ReplayState | None:
            raise IndexLost()

    with pytest.raises(IndexLost):
        await decide(_env(_body({"path": "a.txt"})), PolicyPorts(**{**ports.__dict__, "replays": Lost()}))


async def test_a_decision_records_whether_the_version_was_pinned(
    ports: PolicyPorts, file_system: ToolDescriptor
) -> None:
    pinned = await decide(_env(_body({"path": "a.txt"}, version=file_system.version)), ports)
    latest = await decide(_env(_body({"path": "a.txt"}, request_id="r2")), ports)
    assert (pinned.version_pinned, latest.version_pinned) == (True, False)
    newer = msgspec.structs.replace(file_system, version="9.0.0")
    superseded = PolicyPorts(**{**ports.__dict__, "descriptors": InMemoryDescriptorSource([file_system, newer])})
    for decision, allowed in ((pinned, True), (latest, False)):
        answer = await recheck(_query(decision, pinned=decision.version_pinned), superseded, lambda: NOW)
        assert answer.allowed is allowed, answer.reason


def test_the_give_up_denial_carries_nothing_the_agent_wrote() -> None:
    env = Envelope(principal="demo-agent", data=_body({"path": 2**60}), request_id="r9")
    denial = fault_denial(env, NOW, "policy_fault", "no decision could be made")
    assert (denial.verdict, denial.reason_code, denial.request_id, denial.request) == (
        Verdict.DENY,
        "policy_fault",
        "r9",
        None,
    )
    assert verify_event(sign_event(denial, KEY), KEY.public_key())


def _policy_text(engine: PolicyEngine) -> str:
    return (Path(__file__).resolve().parents[3] / "deploy/policy/policy.cedar").read_text()


async def _decided(ports: PolicyPorts, principal: str, operation: str, **fields: Any) -> DecisionMade:
    decision = await decide(
        _env(_body(WRITE if operation == "write" else {"path": "a"}, operation=operation, **fields), principal), ports
    )
    assert decision.request is not None, decision.reason
    return decision


def _query(decision: DecisionMade, approver: str | None = None, pinned: bool = False) -> RecheckQuery:
    assert decision.request is not None and decision.request_hash is not None
    return RecheckQuery(
        principal=decision.principal,
        request=decision.request,
        request_hash=decision.request_hash,
        version_pinned=pinned,
        approver=approver,
    )


async def test_recheck_allows_what_is_still_allowed(ports: PolicyPorts) -> None:
    read = await _decided(ports, "demo-agent", "read")
    answer = await recheck(_query(read), ports, lambda: NOW)
    assert (answer.allowed, answer.reason_code, answer.request_hash) == (True, "still_allowed", read.request_hash)
    write = await _decided(ports, "demo-agent", "write")
    assert (await recheck(_query(write, approver="alice"), ports, lambda: NOW)).allowed


@pytest.mark.parametrize(
    ("approver", "code"),
    [(None, "approval_required"), ("carol", "approver_not_entitled"), ("demo-agent", "approver_not_entitled")],
)
async def test_recheck_requires_an_approver_the_current_policy_accepts(
    ports: PolicyPorts, approver: str | None, code: str
) -> None:
    write = await _decided(ports, "demo-agent", "write")
    answer = await recheck(_query(write, approver=approver), ports, lambda: NOW)
    assert (answer.allowed, answer.reason_code) == (False, code)


async def test_recheck_names_what_changed(
    ports: PolicyPorts, engine: PolicyEngine, file_system: ToolDescriptor
) -> None:
    write = await _decided(ports, "demo-agent", "write")
    freeze = '@id("freeze")\n@reason("writes are frozen")\nforbid (principal, action, resource)'
    forbid = _policy_text(engine) + f'\n{freeze} when {{ context.operation == "write" }};\n'
    frozen = PolicyPorts(**{**ports.__dict__, "policy": PolicyHolder(PolicyEngine(forbid, engine.directory))})
    answer = await recheck(_query(write, approver="alice"), frozen, lambda: NOW)
    assert (answer.allowed, answer.reason_code) == (False, "forbidden") and "frozen" in answer.reason

    empty = PrincipalDirectory.from_toml(APPROVERS)
    removed = PolicyPorts(**{**ports.__dict__, "policy": PolicyHolder(PolicyEngine(_policy_text(engine), empty))})
    answer = await recheck(_query(write, approver="alice"), removed, lambda: NOW)
    assert (answer.allowed, answer.reason_code) == (False, "unknown_principal")

    newer = msgspec.structs.replace(file_system, version="9.0.0")
    superseded = PolicyPorts(**{**ports.__dict__, "descriptors": InMemoryDescriptorSource([file_system, newer])})
    answer = await recheck(_query(write, approver="alice"), superseded, lambda: NOW)
    assert (answer.allowed, answer.reason_code) == (False, "descriptor_superseded") and "9.0.0" in answer.reason
    pinned = await recheck(_query(write, approver="alice", pinned=True), superseded, lambda: NOW)
    assert pinned.allowed, "a request that pinned its version is not superseded"

    gone = PolicyPorts(**{**ports.__dict__, "descriptors": InMemoryDescriptorSource([newer])})
    answer = await recheck(_query(write, approver="alice", pinned=True), gone, lambda: NOW)
    assert (answer.allowed, answer.reason_code) == (False, "descriptor_changed")

    unloaded = PolicyPorts(**{**ports.__dict__, "policy": PolicyHolder(None)})
    assert (await recheck(_query(write, approver="alice"), unloaded, lambda: NOW)).reason_code == "no_policy"


async def test_recheck_refuses_a_version_republished_with_other_content(
    ports: PolicyPorts, file_system: ToolDescriptor
) -> None:
    read = await _decided(ports, "demo-agent", "read")
    republished = msgspec.structs.replace(file_system, timeout_s=file_system.timeout_s + 1)
    changed = PolicyPorts(**{**ports.__dict__, "descriptors": InMemoryDescriptorSource([republished])})
    answer = await recheck(_query(read), changed, lambda: NOW)
    assert (answer.allowed, answer.reason_code) == (False, "descriptor_changed")


async def test_recheck_vouches_only_for_the_hash_of_the_request_it_checked(ports: PolicyPorts) -> None:
    read = await _decided(ports, "demo-agent", "read")
    write = await _decided(ports, "demo-agent", "write")
    assert write.request_hash is not None and read.request is not None
    borrowed = msgspec.structs.replace(_query(read), request_hash=write.request_hash)
    answer = await recheck(borrowed, ports, lambda: NOW)
    assert (answer.allowed, answer.reason_code) == (False, "hash_mismatch")
    other = msgspec.structs.replace(_query(write, approver="alice"), principal="ops-agent")
    answer = await recheck(other, ports, lambda: NOW)
    assert (answer.allowed, answer.reason_code) == (False, "hash_mismatch")


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"request_id": "abc\n"}, "invalid_request_id"),
        ({"tool": "file_system\n"}, "invalid_tool"),
        ({"version": "1.0.0\n"}, "invalid_version"),
        ({"idempotency_key": ""}, "invalid_idempotency_key"),
    ],
)
async def test_a_trailing_newline_is_no_valid_name(ports: PolicyPorts, fields: dict[str, Any], code: str) -> None:
    decision = await decide(_env(_body({"path": "a.txt"}, **fields)), ports)
    assert (decision.verdict, decision.reason_code) == (Verdict.REFUSE, code)
    assert "\n" not in decision.request_id


@pytest.mark.parametrize(
    ("arguments", "pointer"),
    [
        ({"path": 2**60}, "/request/arguments/path"),
        ({"path": "a", "n": [_nested(100)]}, "/request/arguments/n/0"),
    ],
    ids=["big-int", "too-deep"],
)
async def test_a_recheck_query_no_hash_can_carry_is_answered_not_allowed(
    ports: PolicyPorts, arguments: dict[str, Any], pointer: str
) -> None:
    read = await _decided(ports, "demo-agent", "read")
    assert read.request is not None
    hostile = msgspec.structs.replace(_query(read), request=msgspec.structs.replace(read.request, arguments=arguments))
    answer = await recheck(hostile, ports, lambda: NOW)
    assert (answer.allowed, answer.reason_code) == (False, "unrepresentable_value"), answer.reason
    assert pointer in answer.reason
    assert verify_event(sign_event(answer, KEY), KEY.public_key()), "the answer itself must be signable"
