"""The backstop ends every request that outlived its deadlines, and a late delivery can never run it after."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.events import ApprovalRequested
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Outcome, Verdict
from effectgate.executor.background.backstop import Deadlines, deadline
from effectgate.executor.effects.timing import Timing
from effectgate.executor.ports import ApprovalTrail, ClaimRequest
from effectgate.shared.consumer.acks import Later, Settle

WRITE = {"path": "late.txt", "content": "x"}


def _past(harness: Any, seconds: float = 3600) -> datetime:
    return harness.clock() - timedelta(seconds=seconds)


async def test_a_young_request_is_only_scheduled(harness: Any) -> None:
    settle = await harness.backstop.check("demo-agent", "r1", harness.clock() - timedelta(seconds=15))
    assert settle == Later(45.0) and harness.receipts == []


async def test_a_request_that_ended_is_released(harness: Any) -> None:
    await harness.executor.on_decision(harness.decision("read", {"path": "a.txt"}))
    before = dict(harness.bus.receipts)
    assert await harness.backstop.check("demo-agent", "r1", _past(harness)) is Settle.ACK
    assert harness.bus.receipts == before


@pytest.mark.parametrize("forged", [False, True])
async def test_an_undecided_request_ends_failed_and_a_late_decision_never_runs(
    harness: Any, sandbox: Path, forged: bool
) -> None:
    if forged:
        harness.bus.decisions["r1"] = sign_event(harness.decision("write", WRITE), Ed25519PrivateKey.generate())
    assert await harness.backstop.check("demo-agent", "r1", _past(harness)) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.FAILED, "not_decided")
    assert "backstop" in harness.bus.receipts["r1"].reason
    assert await harness.executor.on_decision(harness.decision("write", WRITE)) is Settle.ACK
    assert not (sandbox / "late.txt").exists(), "a decision arriving after the backstop ran the write"
    assert harness.receipt("r1") == (Outcome.FAILED, "not_decided")


async def test_an_executed_decision_that_never_ran_ends_failed_and_never_runs_later(
    harness: Any, sandbox: Path
) -> None:
    decision = harness.decision("write", WRITE, age_s=3600)
    assert await harness.backstop.check("demo-agent", "r1", _past(harness)) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.FAILED, "not_executed")
    await harness.executor.on_decision(decision)
    assert not (sandbox / "late.txt").exists()


async def test_a_request_within_its_deadlines_is_only_scheduled(harness: Any, sandbox: Path) -> None:
    decision = harness.decision("write", WRITE)
    settle = await harness.backstop.check("demo-agent", "r1", _past(harness, 120))
    assert isinstance(settle, Later) and harness.receipts == []
    assert await harness.executor.on_decision(decision) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.SUCCEEDED, "ok") and (sandbox / "late.txt").exists()


async def _started(harness: Any, decision: Any, instance: str) -> None:
    request = ClaimRequest("demo-agent", "k1", decision.request_hash, "r1", instance, "n", 600)
    await harness.store.claim(request)
    await harness.new_instance(instance).claims.record(decision)


async def test_a_live_run_is_waited_for_and_a_dead_one_ends_uncertain(harness: Any) -> None:
    decision = harness.decision("write", WRITE, age_s=3600)
    await _started(harness, decision, "exec-live")
    await harness.store.heartbeat("exec-live", 60)
    settle = await harness.backstop.check("demo-agent", "r1", _past(harness))
    assert isinstance(settle, Later) and harness.receipts == []
    harness.clock.now += timedelta(seconds=3600)  # now past its timeout and grace, alive or not
    assert await harness.backstop.check("demo-agent", "r1", _past(harness, 7200)) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.UNCERTAIN, "execution_interrupted")


async def test_an_approval_never_answered_ends_denied_and_a_later_grant_runs_nothing(
    harness: Any, sandbox: Path
) -> None:
    decision = harness.decision("write", WRITE, verdict=Verdict.NEEDS_APPROVAL, age_s=1000)
    requested = ApprovalRequested(
        event_id="q",
        occurred_at=decision.occurred_at,
        request_id="r1",
        principal="demo-agent",
        approval_id="ap-1",
        request_hash=decision.request_hash,
        approver_role="operator",
        expires_at=harness.clock() - timedelta(seconds=30),
        request=decision.request,
    )
    harness.bus.trails["r1"] = ApprovalTrail(requested=requested)
    assert await harness.backstop.check("demo-agent", "r1", _past(harness, 1000)) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.DENIED, "approval_not_answered")
    assert await harness.executor.on_granted(harness.grant(decision)) is Settle.TERM
    assert not (sandbox / "late.txt").exists()


async def test_a_granted_call_that_never_ran_ends_failed(harness: Any, sandbox: Path) -> None:
    decision = harness.decision("write", WRITE, verdict=Verdict.NEEDS_APPROVAL, age_s=3600)
    grant = msgspec.structs.replace(harness.grant(decision), occurred_at=_past(harness))
    harness.bus.trails["r1"] = ApprovalTrail(granted=(sign_event(grant, harness.approvals_key),))
    assert await harness.backstop.check("demo-agent", "r1", _past(harness)) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.FAILED, "not_executed")
    assert not (sandbox / "late.txt").exists()


async def test_a_missed_denial_is_issued(harness: Any) -> None:
    harness.decision("read", {"path": "a.txt"}, verdict=Verdict.DENY, age_s=3600)
    assert await harness.backstop.check("demo-agent", "r1", _past(harness)) is Settle.ACK
    assert harness.receipt("r1")[0] is Outcome.DENIED


def test_the_deadline_of_each_stage() -> None:
    now, timing, limits = datetime(2026, 11, 30, tzinfo=UTC), Timing(stale_grace_s=30), Deadlines(300, 60, 300)

    def at(seconds: float) -> datetime:
        return now + timedelta(seconds=seconds)

    class D:
        def __init__(self, verdict: Verdict) -> None:
            self.verdict, self.occurred_at, self.timeout_s = verdict, now, 10.0

    assert deadline(now, None, ApprovalTrail(), timing, limits) == at(300)
    assert deadline(now, D(Verdict.EXECUTE), ApprovalTrail(), timing, limits) == at(10 + 30 + 60)  # type: ignore[arg-type]
    assert deadline(now, D(Verdict.DENY), ApprovalTrail(), timing, limits) == at(60)  # type: ignore[arg-type]
    pending = deadline(now, D(Verdict.NEEDS_APPROVAL), ApprovalTrail(), timing, limits)  # type: ignore[arg-type]
    assert pending == at(timing.decision_max_age_s + 60)
