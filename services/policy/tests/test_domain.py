"""The policy pipeline over in-memory ports: order of checks, refusals, fail-closed paths."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from effectgate.contracts.events import ToolRequested, encode, request_hash, request_identity
from effectgate.contracts.tools.descriptors import RateLimit, ToolDescriptor
from effectgate.contracts.tools.tool_states import ToolState
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.loading import load_policy
from effectgate.policy.domain import LimitDecision
from effectgate.policy.errors import LimiterUnavailable, PolicyError
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.ports import ReplayState
from effectgate.policy.service import MAX_REASON_CHARS, Envelope, PolicyPorts

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def file_system(repo_root: Path) -> ToolDescriptor:
    data = (repo_root / "deploy" / "tools" / "file_system.json").read_bytes()
    return msgspec.json.decode(data, type=ToolDescriptor)


@pytest.fixture
def ports(repo_root: Path, file_system: ToolDescriptor) -> PolicyPorts:
    engine = load_policy(repo_root / "deploy/policy/policy.cedar", repo_root / "deploy/policy/principals.toml")
    return PolicyPorts(
        policy=PolicyHolder(engine),
        descriptors=InMemoryDescriptorSource([file_system]),
        limiter=InMemoryRateLimiter(),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=4096,
    )


def _request(operation: str = "read", arguments: dict[str, object] | None = None, **fields: object) -> bytes:
    request = ToolRequested(
        event_id="r1",
        occurred_at=NOW,
        request_id=str(fields.pop("request_id", "r1")),
        tool=str(fields.pop("tool", "file_system")),
        operation=operation,
        arguments={"path": "a.txt"} if arguments is None else arguments,
        idempotency_key=str(fields.pop("idempotency_key", "k1")),
    )
    return encode(request)


def _env(data: bytes, principal: str = "demo-agent", msg_id: str | None = None) -> Envelope:
    return Envelope(principal=principal, data=data, request_id=request_identity(data, msg_id, 7))


async def test_read_executes_with_bound_request(ports: PolicyPorts) -> None:
    decision = await decide(_env(_request()), ports)
    assert decision.verdict is Verdict.EXECUTE
    assert decision.request is not None and decision.request.principal == "demo-agent"
    assert decision.request_hash == request_hash(decision.request)
    assert decision.event_id == "decision:demo-agent:r1"


async def test_write_needs_operator_approval(ports: PolicyPorts) -> None:
    decision = await decide(_env(_request("write", {"path": "a", "content": "x"})), ports)
    assert (decision.verdict, decision.approver_role) == (Verdict.NEEDS_APPROVAL, "operator")


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"\xff\xfe not json", "malformed"),
        (b'{"type": "tool.requested"}', "malformed"),
        (b"[1, 2, 3]", "malformed"),
        (b"x" * 5000, "oversized"),
    ],
)
async def test_malformed_and_oversized_are_refused_under_the_fallback_id(
    ports: PolicyPorts, data: bytes, code: str
) -> None:
    decision = await decide(_env(data, msg_id="msg-1"), ports)
    assert (decision.verdict, decision.reason_code, decision.request_id) == (Verdict.REFUSE, code, "msg-1")


async def test_without_a_header_an_unreadable_body_is_known_by_its_sequence(ports: PolicyPorts) -> None:
    decision = await decide(_env(b"garbage"), ports)
    assert (decision.reason_code, decision.request_id) == ("malformed", "seq7")


async def test_the_body_request_id_wins_over_the_header(ports: PolicyPorts) -> None:
    decision = await decide(_env(_request(), msg_id="other"), ports)
    assert (decision.verdict, decision.request_id) == (Verdict.EXECUTE, "r1")


async def test_a_principal_field_in_the_body_is_refused(ports: PolicyPorts) -> None:
    body = msgspec.json.decode(_request())
    body["principal"] = "admin"
    decision = await decide(_env(msgspec.json.encode(body)), ports)
    assert decision.reason_code == "malformed" and "principal" in decision.reason


async def test_schema_invalid_names_the_path(ports: PolicyPorts) -> None:
    decision = await decide(_env(_request(arguments={"path": 7})), ports)
    assert (decision.verdict, decision.reason_code) == (Verdict.REFUSE, "schema_invalid")
    assert "/path" in decision.reason


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"tool": "nope"}, "unknown_tool"),
        ({"request_id": "a.b"}, "invalid_request_id"),
        ({"request_id": ""}, "invalid_request_id"),
        ({"idempotency_key": "k" * 256}, "invalid_idempotency_key"),
        ({"idempotency_key": "k\nCall: file_system.read"}, "invalid_idempotency_key"),
        ({"idempotency_key": "k\u202e"}, "invalid_idempotency_key"),
        ({"idempotency_key": "a\u034fb"}, "invalid_idempotency_key"),
    ],
)
async def test_unknown_or_invalid_identifiers(ports: PolicyPorts, fields: dict[str, object], code: str) -> None:
    decision = await decide(_env(_request(**fields)), ports)
    assert decision.reason_code == code and decision.verdict in (Verdict.DENY, Verdict.REFUSE)


async def test_a_copy_of_a_stored_message_is_refused_not_decided(ports: PolicyPorts) -> None:
    data = _request()
    copied = Envelope(principal="demo-agent", data=data, request_id="r1", copied_from="EFFECTGATE")
    decision = await decide(copied, ports)
    assert (decision.verdict, decision.reason_code) == (Verdict.REFUSE, "copied_stream_message")
    assert (await decide(_env(data), ports)).verdict is Verdict.EXECUTE


async def test_unknown_operation_and_unknown_principal_are_denied(ports: PolicyPorts) -> None:
    assert (await decide(_env(_request("delete")), ports)).reason_code == "unknown_operation"
    assert (await decide(_env(_request(), "nobody"), ports)).reason_code == "unknown_principal"


async def test_no_policy_denies(ports: PolicyPorts) -> None:
    ports = PolicyPorts(**{**ports.__dict__, "policy": PolicyHolder(None)})
    decision = await decide(_env(_request()), ports)
    assert (decision.verdict, decision.reason_code) == (Verdict.DENY, "no_policy")


async def test_denied_calls_do_not_consume_the_rate_limit(ports: PolicyPorts, file_system: ToolDescriptor) -> None:
    for _ in range(20):
        assert (await decide(_env(_request(), "nobody"), ports)).verdict is Verdict.DENY
        assert (await decide(_env(_request(arguments={})), ports)).verdict is Verdict.REFUSE
    verdicts = [(await decide(_env(_request(request_id=f"r{n}")), ports)).verdict for n in range(6)]
    assert verdicts == [Verdict.EXECUTE] * file_system.rate_limit.calls + [Verdict.DENY]


async def test_calls_cedar_denies_do_not_use_up_the_same_principals_rate(
    ports: PolicyPorts, file_system: ToolDescriptor, repo_root: Path
) -> None:
    assert ports.policy.engine is not None
    no_writes = '@id("no-writes")\nforbid (principal, action, resource) when { context.operation == "write" };\n'
    text = (repo_root / "deploy/policy/policy.cedar").read_text() + "\n" + no_writes
    ports = PolicyPorts(**{**ports.__dict__, "policy": PolicyHolder(PolicyEngine(text, ports.policy.engine.directory))})
    for n in range(20):
        write = await decide(_env(_request("write", {"path": "a", "content": "x"}, request_id=f"w{n}")), ports)
        assert (write.verdict, write.reason_code, write.hidden_reason_code) == (
            Verdict.DENY,
            "unknown_operation",
            "forbidden",
        )
    calls = file_system.rate_limit.calls
    verdicts = [(await decide(_env(_request(request_id=f"r{n}")), ports)).verdict for n in range(calls + 1)]
    assert verdicts == [Verdict.EXECUTE] * calls + [Verdict.DENY], "the same principal's rate was used up"


async def test_a_registry_fault_denies(ports: PolicyPorts) -> None:
    class Broken:
        async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
            raise TimeoutError("the KV bucket did not answer")

    decision = await decide(_env(_request()), PolicyPorts(**{**ports.__dict__, "descriptors": Broken()}))
    assert (decision.verdict, decision.reason_code) == (Verdict.DENY, "registry_unavailable")


async def test_an_unreadable_idempotency_index_denies(ports: PolicyPorts) -> None:
    class Unreadable:
        async def lookup(self, principal: str, idempotency_key: str) -> ReplayState | None:
            raise PolicyError("idempotency_store_unavailable", "redis down")

    decision = await decide(_env(_request()), PolicyPorts(**{**ports.__dict__, "replays": Unreadable()}))
    assert (decision.verdict, decision.reason_code) == (Verdict.DENY, "idempotency_store_unavailable")


async def test_limiter_unavailable_denies(ports: PolicyPorts) -> None:
    class Down:
        async def admit(self, principal: str, bucket: str, rate: RateLimit, request_id: str) -> LimitDecision:
            raise LimiterUnavailable("redis down")

    decision = await decide(_env(_request()), PolicyPorts(**{**ports.__dict__, "limiter": Down()}))
    assert (decision.verdict, decision.reason_code) == (Verdict.DENY, "rate_limiter_unavailable")


async def test_completed_key_replays_without_policy_and_other_arguments_are_refused(ports: PolicyPorts) -> None:
    first = await decide(_env(_request("write", {"path": "a", "content": "x"})), ports)
    assert first.request_hash is not None
    replays = InMemoryReplayIndex({("demo-agent", "k1"): ReplayState(done=True, fingerprint=first.request_hash)})
    ports = PolicyPorts(**{**ports.__dict__, "replays": replays})
    again = await decide(_env(_request("write", {"path": "a", "content": "x"}, request_id="r2")), ports)
    assert (again.verdict, again.reason_code) == (Verdict.EXECUTE, "idempotent_replay")
    other = await decide(_env(_request("write", {"path": "a", "content": "y"}, request_id="r3")), ports)
    assert (other.verdict, other.reason_code) == (Verdict.REFUSE, "idempotency_key_reused")


class _States:
    """The tools' recorded states, in memory (the ``ToolStates`` port)."""

    def __init__(self, **states: ToolState) -> None:
        self.states = states

    async def state(self, tool: str) -> ToolState | None:
        return self.states.get(tool)


@pytest.mark.parametrize(
    ("state", "verdict", "code"),
    [
        (ToolState(state="unavailable", reason="ended its connection", since=NOW), Verdict.DENY, "tool_unavailable"),
        (
            ToolState(state="degraded", reason="circuit open", since=NOW, probe_at=NOW + timedelta(seconds=1)),
            Verdict.DENY,
            "tool_unavailable",
        ),
        (  # past its probe time: the call reaches the executor, which lets one probe through
            ToolState(state="degraded", reason="circuit open", since=NOW, probe_at=NOW - timedelta(seconds=1)),
            Verdict.EXECUTE,
            "permitted",
        ),
        (ToolState(state="ready", reason="2 tools, 0.4 s", since=NOW), Verdict.EXECUTE, "permitted"),
    ],
)
async def test_a_tool_its_server_cannot_serve_is_denied_at_once(
    ports: PolicyPorts, state: ToolState, verdict: Verdict, code: str
) -> None:
    decision = await decide(_env(_request()), replace(ports, states=_States(file_system=state)))

    assert (decision.verdict, decision.reason_code) == (verdict, code)
    if code == "tool_unavailable":
        assert decision.reason == f"file_system is {state.state}: {state.reason}"


async def test_an_unreadable_state_denies(ports: PolicyPorts) -> None:
    class Broken:
        async def state(self, tool: str) -> ToolState | None:
            raise ConnectionError("bucket gone")

    decision = await decide(_env(_request()), replace(ports, states=Broken()))

    assert (decision.verdict, decision.reason_code) == (Verdict.DENY, "registry_unavailable")


@pytest.mark.parametrize(
    "arguments",
    [
        {"path": ["p" * 60_000]},  # a value of the wrong type, quoted by the schema's message
        {"path": {"k" * 30_000: "v" * 30_000}},
        {"path": "a.txt", **{f"extra-{index}-" + "x" * 200: index for index in range(250)}},  # names quoted
        {"path": [[["q" * 20_000, "r" * 20_000]]]},
    ],
    ids=["wrong-type-list", "wrong-type-object", "many-unexpected-names", "wrong-type-nested"],
)
async def test_a_reason_quoting_what_the_agent_sent_is_bounded_so_the_decision_fits_as_its_request_did(
    ports: PolicyPorts, arguments: dict[str, object]
) -> None:
    large = replace(ports, max_request_bytes=1_048_576)
    request = _request(arguments=arguments)

    decision = await decide(_env(request), large)

    assert (decision.verdict, decision.reason_code) == (Verdict.REFUSE, "schema_invalid")
    assert len(decision.reason) <= MAX_REASON_CHARS + 80 and "reason cut at" in decision.reason
    assert decision.reason.startswith("arguments invalid at /")
    assert len(encode(decision)) <= len(request) + 2 * MAX_REASON_CHARS + 4_096
