"""The pure rules of Python tools: what an answer means, when a call is retried, what a tool's state is."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from effectgate.contracts.tools.descriptors import OperationSpec, RetryPolicy, ToolDescriptor, descriptor_digest
from effectgate.contracts.tools.hosting import ServedTool, WorkerAlive, WorkerAnswer
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.executor.adapters.python.answers import answered, decoded, no_answer, no_worker
from effectgate.executor.adapters.python.retries import Transient, backoff_s, retries, retry_policy
from effectgate.executor.adapters.python.roster import MAX_INSTANCES, Roster
from effectgate.executor.adapters.python.serial import lock_key
from effectgate.executor.effects.calling import Effected
from effectgate.executor.errors import ToolFailed, ToolOutcomeUnknown, ToolRefused

SCHEMA = {"type": "object", "properties": {"account": {"type": "string"}}}


def spec(side: SideEffectClass = SideEffectClass.READ_ONLY, **fields: object) -> OperationSpec:
    return OperationSpec(
        input_schema=SCHEMA, output_schema={}, side_effect_class=side, risk_tier=RiskTier.LOW, **fields
    )  # type: ignore[arg-type]


def answer(outcome: str, **fields: object) -> WorkerAnswer:
    return WorkerAnswer(call_id="c1", outcome=outcome, **fields)  # type: ignore[arg-type]


def test_an_ok_answer_is_its_result_and_its_effect_id_comes_with_it() -> None:
    assert answered(answer("ok", result={"n": 1}), "here") == {"n": 1}
    assert answered(answer("ok", result=[1], effect_id="pay_9"), "here") == Effected([1], "pay_9")


@pytest.mark.parametrize(
    ("outcome", "retryable", "raised"),
    [("refused", False, ToolRefused), ("failed", False, ToolFailed), ("uncertain", False, ToolOutcomeUnknown)],
)
def test_a_worker_s_answer_ends_the_call_as_it_says(outcome: str, retryable: bool, raised: type) -> None:
    with pytest.raises(raised) as caught:
        answered(answer(outcome, reason_code="quota", reason="over quota", retryable=retryable), "tool x")
    assert caught.value.reason_code == "quota" and "tool x: over quota" in caught.value.reason


def test_a_retryable_failure_is_transient_and_a_refusal_never_is() -> None:
    with pytest.raises(Transient) as caught:
        answered(answer("failed", reason_code="busy", retryable=True), "x")
    assert caught.value.code == "busy" and isinstance(caught.value.error, ToolFailed) and not caught.value.unknown
    with pytest.raises(ToolRefused):
        answered(answer("refused", reason_code="no", retryable=True), "x")


def test_silence_fails_a_read_and_leaves_a_write_unknown_and_no_worker_is_a_refusal() -> None:
    assert isinstance(no_answer(SideEffectClass.READ_ONLY, "tool_timeout", "r").error, ToolFailed)
    unknown = no_answer(SideEffectClass.REVERSIBLE_WRITE, "tool_timeout", "r")
    assert isinstance(unknown.error, ToolOutcomeUnknown) and unknown.unknown
    nobody = no_worker("x")
    assert nobody.error.reason_code == "tool_unavailable" and isinstance(nobody.error, ToolRefused)


def test_an_answer_to_another_call_or_no_answer_at_all_is_none() -> None:
    assert decoded(msgspec.json.encode(answer("ok")), "c1", "x") == answer("ok")
    assert decoded(msgspec.json.encode(answer("ok")), "c2", "x") is None
    assert decoded(b"{not json", "c1", "x") is None
    assert decoded(b'{"call_id": "c1", "outcome": "maybe"}', "c1", "x") is None


def test_only_reads_and_writes_idempotent_at_their_target_are_retried() -> None:
    policy = RetryPolicy(attempts=3)
    assert retry_policy(spec(retry=policy)) == policy
    assert retry_policy(spec(SideEffectClass.REVERSIBLE_WRITE, retry=policy, idempotent_at_target=True)) == policy
    assert retry_policy(spec(SideEffectClass.REVERSIBLE_WRITE, retry=policy)) is None
    assert retry_policy(spec(SideEffectClass.FINANCIAL, retry=policy)) is None
    assert retry_policy(spec()) is None


def test_a_policy_retries_its_codes_up_to_its_attempts_with_doubling_backoff() -> None:
    policy = RetryPolicy(attempts=4, backoff_s=0.5, max_backoff_s=1.5, on=("busy",))
    assert retries(policy, "busy", 1) and retries(policy, "busy", 3)
    assert not retries(policy, "busy", 4) and not retries(policy, "quota", 1) and not retries(None, "busy", 1)
    assert retries(RetryPolicy(on=()), "anything", 1)
    assert [backoff_s(policy, n) for n in (1, 2, 3)] == [0.5, 1.0, 1.5]


def test_a_lock_is_the_tool_s_or_the_tool_s_for_one_serialize_by_value() -> None:
    whole = spec(SideEffectClass.REVERSIBLE_WRITE, concurrency_safe=False)
    by = spec(SideEffectClass.REVERSIBLE_WRITE, concurrency_safe=False, serialize_by="/account")
    assert lock_key("bank", whole, {"account": "a"}) == lock_key("bank", whole, {"account": "b"}) == "tg:serial:{bank}"
    a, b = lock_key("bank", by, {"account": "a"}), lock_key("bank", by, {"account": "b"})
    assert a != b and a.startswith("tg:serial:{bank}:") and b.startswith("tg:serial:{bank}:")
    assert lock_key("bank", by, {}) == "tg:serial:{bank}:absent"


def _tool() -> ToolDescriptor:
    return ToolDescriptor(name="bank", version="1.0.0", adapter="python:payments", operations={"pay": spec()})


def _alive(instance: str, digest: str, stopping: bool = False, worker: str = "payments") -> WorkerAlive:
    served = (ServedTool(tool="bank", version="1.0.0", digest=digest),)
    return WorkerAlive(worker=worker, instance=instance, tools=served, at=datetime.now(UTC), stopping=stopping)


def test_a_tool_is_ready_while_a_live_instance_serves_its_published_digest() -> None:
    roster, tool = Roster(ttl_s=6.0), _tool()
    published = descriptor_digest(tool)
    assert roster.verdict(tool, 0.0) == ("unavailable", "no live instance of worker payments serves bank")
    roster.heard("payments", _alive("i1", published), 0.0)
    assert roster.verdict(tool, 5.0) == ("ready", "worker payments serves bank 1.0.0")
    assert roster.verdict(tool, 6.5)[0] == "unavailable"  # the announcement lapsed


def test_an_instance_declaring_another_digest_makes_the_tool_unavailable_naming_both() -> None:
    roster, tool = Roster(), _tool()
    roster.heard("payments", _alive("i1", "sha256:other"), 0.0)
    state, reason = roster.verdict(tool, 1.0)
    assert state == "unavailable"
    assert f"declares bank 1.0.0 sha256:other, published 1.0.0 {descriptor_digest(tool)}: publish" in reason


def test_a_stopping_instance_stops_counting_at_once_and_another_worker_s_never_counts() -> None:
    roster, tool = Roster(), _tool()
    digest = descriptor_digest(tool)
    roster.heard("payments", _alive("i1", digest), 0.0)
    roster.heard("payments", _alive("i1", digest, stopping=True), 0.1)
    roster.heard("other", _alive("i2", digest, worker="other"), 0.1)
    assert roster.verdict(tool, 0.2)[0] == "unavailable"
    assert roster.verdict(msgspec.structs.replace(tool, adapter="file_system"), 0.2) is None


def test_a_flood_of_instances_counts_only_the_first_of_each_worker_until_they_lapse() -> None:
    """One worker's credentials announcing ever new instances cannot grow what the executor judges."""
    roster, tool = Roster(ttl_s=6.0), _tool()
    digest = descriptor_digest(tool)
    for n in range(MAX_INSTANCES * 10):
        roster.heard("payments", _alive(f"fake-{n}", "sha256:other"), 0.0)
    assert not roster.heard("payments", _alive("real", digest), 1.0)
    assert len(roster.served("payments", "bank", 1.0)) == MAX_INSTANCES
    assert roster.heard("refunds", _alive("r1", digest, worker="refunds"), 1.0)  # another worker is not held up
    assert roster.heard("payments", _alive("real", digest), 6.5) and roster.verdict(tool, 6.5)[0] == "ready"
