"""Admission: a call's rate budget is consumed when it is admitted to run, once per request id.

Direct calls are admitted at their decision, granted calls at the executor's re-check
before the effect; a call waiting for an approval consumes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from effectgate.contracts.events import DecisionMade, ToolRequested, encode, request_identity
from effectgate.contracts.rpc.recheck import RecheckQuery
from effectgate.contracts.tools.descriptors import RateLimit, ToolDescriptor, rate_limit_problem, rate_of
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.loading import load_policy
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.pipeline.recheck import recheck
from effectgate.policy.ports import ReplayState
from effectgate.policy.service import Envelope, PolicyPorts

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WRITE = {"path": "a.txt", "content": "x"}


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def file_system(repo_root: Path) -> ToolDescriptor:
    return msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes(), type=ToolDescriptor)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ports(repo_root: Path, file_system: ToolDescriptor, clock: Clock) -> PolicyPorts:
    return PolicyPorts(
        policy=PolicyHolder(
            load_policy(repo_root / "deploy/policy/policy.cedar", repo_root / "deploy/policy/principals.toml")
        ),
        descriptors=InMemoryDescriptorSource([file_system]),
        limiter=InMemoryRateLimiter(clock),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=65536,
    )


def _with(ports: PolicyPorts, descriptor: ToolDescriptor) -> PolicyPorts:
    return PolicyPorts(**{**ports.__dict__, "descriptors": InMemoryDescriptorSource([descriptor])})


async def _decide(
    ports: PolicyPorts, operation: str, rid: str, principal: str = "demo-agent", key: str | None = None
) -> DecisionMade:
    request = ToolRequested(
        event_id=rid,
        occurred_at=NOW,
        request_id=rid,
        tool="file_system",
        operation=operation,
        arguments=WRITE if operation == "write" else {"path": "a.txt"},
        idempotency_key=key or f"k-{rid}",
    )
    data = encode(request)
    return await decide(Envelope(principal=principal, data=data, request_id=request_identity(data, None, 1)), ports)


def _admitting(decision: DecisionMade, approver: str | None = "alice", admit: str | None = None) -> RecheckQuery:
    assert decision.request is not None and decision.request_hash is not None
    return RecheckQuery(
        principal=decision.principal,
        request=decision.request,
        request_hash=decision.request_hash,
        approver=approver,
        admit_request_id=decision.request_id if admit is None else admit,
    )


async def _reads(ports: PolicyPorts, count: int, prefix: str = "read") -> list[str]:
    return [(await _decide(ports, "read", f"{prefix}{n}")).reason_code for n in range(count)]


# --- at the decision ----------------------------------------------------------------------------


async def test_pending_approvals_consume_nothing(ports: PolicyPorts, file_system: ToolDescriptor) -> None:
    writes = [await _decide(ports, "write", f"w{n}") for n in range(3 * file_system.rate_limit.calls)]
    assert {w.verdict for w in writes} == {Verdict.NEEDS_APPROVAL}
    assert all(w.retry_after_s is None for w in writes)
    codes = await _reads(ports, file_system.rate_limit.calls + 1)
    assert codes == ["permitted"] * file_system.rate_limit.calls + ["rate_limited"]


async def test_a_rate_limited_decision_carries_retry_after(ports: PolicyPorts, file_system: ToolDescriptor) -> None:
    await _reads(ports, file_system.rate_limit.calls)
    limited = await _decide(ports, "read", "over")
    assert (limited.verdict, limited.reason_code) == (Verdict.DENY, "rate_limited")
    assert limited.retry_after_s is not None and 0 < limited.retry_after_s <= 12.0  # 60 s / 5 calls
    assert f"{limited.retry_after_s:.3f}s" in limited.reason and "file_system" in limited.reason
    pending = await _decide(ports, "write", "w1")
    assert (pending.verdict, pending.retry_after_s) == (Verdict.NEEDS_APPROVAL, None)


async def test_a_request_decided_again_is_counted_once(ports: PolicyPorts, file_system: ToolDescriptor) -> None:
    for _ in range(10):  # redeliveries of one request to the policy service
        assert (await _decide(ports, "read", "same")).verdict is Verdict.EXECUTE
    codes = await _reads(ports, file_system.rate_limit.calls)
    assert codes == ["permitted"] * (file_system.rate_limit.calls - 1) + ["rate_limited"]


async def test_an_operations_own_rate_is_a_budget_of_its_own(ports: PolicyPorts, file_system: ToolDescriptor) -> None:
    spec = msgspec.structs.replace(file_system.operations["list"], rate_limit=RateLimit(calls=2, period_s=60.0))
    limited = _with(ports, msgspec.structs.replace(file_system, operations={**file_system.operations, "list": spec}))
    lists = [(await _decide(limited, "list", f"l{n}")).reason_code for n in range(3)]
    assert lists == ["permitted", "permitted", "rate_limited"]
    assert "file_system.list" in (await _decide(limited, "list", "l9")).reason
    assert await _reads(limited, file_system.rate_limit.calls + 1) == ["permitted"] * 5 + ["rate_limited"]


async def test_a_replay_of_a_call_that_needed_approval_takes_the_budget(
    ports: PolicyPorts, file_system: ToolDescriptor
) -> None:
    first = await _decide(ports, "write", "w0")
    assert first.verdict is Verdict.NEEDS_APPROVAL and first.request_hash is not None
    done = InMemoryReplayIndex({("demo-agent", "k"): ReplayState(done=True, fingerprint=first.request_hash)})
    replaying = PolicyPorts(**{**ports.__dict__, "replays": done})
    codes = [(await _decide(replaying, "write", f"w{n}", key="k")).reason_code for n in range(1, 7)]
    assert codes == ["idempotent_replay"] * file_system.rate_limit.calls + ["rate_limited"]


# --- at the re-check of a granted call ----------------------------------------------------------


async def test_a_grant_is_admitted_once_at_its_recheck(ports: PolicyPorts, file_system: ToolDescriptor) -> None:
    write = await _decide(ports, "write", "w1")
    for _ in range(4):  # the executor asks again after a lost answer or a redelivered grant
        answer = await recheck(_admitting(write), ports, lambda: NOW)
        assert (answer.allowed, answer.admitted_request_id) == (True, "w1")
    codes = await _reads(ports, file_system.rate_limit.calls)
    assert codes == ["permitted"] * (file_system.rate_limit.calls - 1) + ["rate_limited"]


@pytest.mark.parametrize("approver", ["alice", None])
async def test_a_recheck_that_does_not_admit_consumes_nothing(
    ports: PolicyPorts, file_system: ToolDescriptor, approver: str | None
) -> None:
    write, read = await _decide(ports, "write", "w1"), await _decide(ports, "read", "r-first")
    for _ in range(10):  # the approvals service on a grant; the executor's re-check of an old decision
        await recheck(msgspec.structs.replace(_admitting(write, approver), admit_request_id=None), ports, lambda: NOW)
        await recheck(msgspec.structs.replace(_admitting(read, None), admit_request_id=None), ports, lambda: NOW)
    codes = await _reads(ports, file_system.rate_limit.calls)
    assert codes == ["permitted"] * (file_system.rate_limit.calls - 1) + ["rate_limited"]


async def test_a_grant_over_the_rate_is_not_admitted_and_told_when_to_retry(
    ports: PolicyPorts, file_system: ToolDescriptor, clock: Clock
) -> None:
    write = await _decide(ports, "write", "w1")
    await _reads(ports, file_system.rate_limit.calls)
    answer = await recheck(_admitting(write), ports, lambda: NOW)
    assert (answer.allowed, answer.reason_code, answer.admitted_request_id) == (False, "rate_limited", "w1")
    assert answer.retry_after_s is not None and 0 < answer.retry_after_s <= 12.0
    clock.now_s += answer.retry_after_s
    assert (await recheck(_admitting(write), ports, lambda: NOW)).allowed, "nothing was taken by the refusal"


async def test_a_grant_the_policy_no_longer_allows_is_not_admitted(
    ports: PolicyPorts, file_system: ToolDescriptor
) -> None:
    write = await _decide(ports, "write", "w1")
    for approver in ("carol", "demo-agent"):  # not entitled: nothing consumed
        answer = await recheck(_admitting(write, approver), ports, lambda: NOW)
        assert (answer.allowed, answer.reason_code) == (False, "approver_not_entitled")
    assert await _reads(ports, file_system.rate_limit.calls) == ["permitted"] * file_system.rate_limit.calls


@pytest.mark.parametrize("bad", ["", "r 1", "r1\n", "x" * 65, "a:b"])
async def test_an_admission_for_an_invalid_request_id_is_refused(ports: PolicyPorts, bad: str) -> None:
    write = await _decide(ports, "write", "w1")
    answer = await recheck(_admitting(write, admit=bad), ports, lambda: NOW)
    assert (answer.allowed, answer.reason_code) == (False, "invalid_request_id")


# --- which budget a call uses, and what a budget may be -----------------------------------------


def test_an_operations_rate_takes_precedence_over_the_tools(file_system: ToolDescriptor) -> None:
    own = RateLimit(calls=1, period_s=5.0)
    spec = msgspec.structs.replace(file_system.operations["write"], rate_limit=own)
    descriptor = msgspec.structs.replace(file_system, operations={**file_system.operations, "write": spec})
    assert rate_of(descriptor, "write") == ("file_system.write", own)
    assert rate_of(descriptor, "read") == ("file_system", file_system.rate_limit)
    assert ToolDescriptor(name="t", version="1.0.0", adapter="x", operations={}).rate_limit == RateLimit(
        calls=60, period_s=60.0
    )


@pytest.mark.parametrize(
    ("calls", "period_s", "named"),
    [
        (0, 60.0, "calls"),
        (-1, 60.0, "calls"),
        (True, 60.0, "calls"),
        (1_000_001, 60.0, "calls"),
        (5, 0.0, "period_s"),
        (5, -3.0, "period_s"),
        (5, float("nan"), "period_s"),
        (5, float("inf"), "period_s"),
        (5, 31_536_001.0, "period_s"),
    ],
)
def test_a_rate_that_cannot_be_used_is_named(calls: Any, period_s: float, named: str) -> None:
    problem = rate_limit_problem(RateLimit(calls=calls, period_s=period_s))
    assert problem is not None and problem.startswith(f"{named}: ")


@pytest.mark.parametrize(("calls", "period_s"), [(1, 0.001), (1_000_000, 1.0), (5, 31_536_000.0)])
def test_a_usable_rate_has_no_problem(calls: int, period_s: float) -> None:
    assert rate_limit_problem(RateLimit(calls=calls, period_s=period_s)) is None
