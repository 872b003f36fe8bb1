"""The executor workflow over in-memory ports: run once, follow claims, re-check, end what cannot run."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.errors import IndexLost
from effectgate.contracts.events import ApprovalRejected
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Outcome, SideEffectClass, Verdict
from effectgate.executor.domain import Claim, ClaimState, Step, next_step
from effectgate.executor.errors import IdempotencyStoreUnavailable
from effectgate.executor.ports import ClaimRequest
from effectgate.shared.consumer.acks import Later, Settle

WRITE = {"path": "b.txt", "content": "one"}


async def test_execute_runs_once_and_redelivery_republishes(harness: Any, sandbox: Path) -> None:
    decision = harness.decision("write", WRITE)
    assert await harness.executor.on_decision(decision) is Settle.ACK
    first = harness.bus.receipts.pop("r1")
    (sandbox / "b.txt").unlink()
    assert await harness.executor.on_decision(decision) is Settle.ACK
    assert not (sandbox / "b.txt").exists(), "a redelivered decision ran the tool again"
    assert harness.bus.receipts["r1"] == first and first.outcome is Outcome.SUCCEEDED


async def test_same_key_other_request_is_replayed_and_other_arguments_refused(harness: Any) -> None:
    await harness.executor.on_decision(harness.decision("read", {"path": "a.txt"}))
    await harness.executor.on_decision(harness.decision("read", {"path": "a.txt"}, rid="r2"))
    await harness.executor.on_decision(harness.decision("write", {"path": "a.txt", "content": "z"}, rid="r3"))
    assert harness.receipt("r2") == (Outcome.REPLAYED, "ok") and harness.bus.receipts["r2"].replay_of == "r1"
    assert harness.receipt("r3") == (Outcome.REFUSED, "idempotency_key_reused")
    assert harness.bus.receipts["r2"].result == harness.bus.receipts["r1"].result


async def test_forged_or_tampered_decisions_run_nothing_and_issue_no_receipt(harness: Any, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "c.txt", "content": "x"})
    assert await harness.executor.on_decision(sign_event(decision, Ed25519PrivateKey.generate())) is Settle.TERM
    swapped = msgspec.structs.replace(decision, request=msgspec.structs.replace(decision.request, arguments={}))
    assert await harness.executor.on_decision(swapped) is Settle.TERM
    assert harness.receipts == [] and not (sandbox / "c.txt").exists()


async def test_deny_and_refuse_end_in_receipts(harness: Any) -> None:
    await harness.executor.on_decision(harness.decision("read", {"path": "a.txt"}, verdict=Verdict.DENY))
    await harness.executor.on_decision(harness.decision("read", {"path": "a.txt"}, rid="r2", verdict=Verdict.REFUSE))
    assert [r.outcome for r in harness.receipts] == [Outcome.DENIED, Outcome.REFUSED]


async def test_grant_runs_only_the_approved_arguments(harness: Any, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "d.txt", "content": "approved"}, verdict=Verdict.NEEDS_APPROVAL)
    assert await harness.executor.on_decision(decision) is Settle.ACK and harness.receipts == []
    other = msgspec.structs.replace(decision.request, arguments={"path": "d.txt", "content": "other"})
    from effectgate.contracts.events import request_hash

    assert await harness.executor.on_granted(harness.grant(decision, request_hash(other))) is Settle.TERM
    foreign = harness.grant(decision, key=Ed25519PrivateKey.generate())
    assert await harness.executor.on_granted(foreign) is Settle.TERM
    assert not (sandbox / "d.txt").exists() and harness.receipts == []
    assert await harness.executor.on_granted(harness.grant(decision)) is Settle.ACK
    assert (sandbox / "d.txt").read_text() == "approved" and harness.receipt("r1") == (Outcome.SUCCEEDED, "ok")
    [query] = harness.bus.rechecks
    assert (query.approver, query.request_hash) == ("alice", decision.request_hash), "a grant is re-checked"


async def test_expired_grant_is_denied_and_runs_nothing(harness: Any, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "e.txt", "content": "x"}, verdict=Verdict.NEEDS_APPROVAL)
    assert await harness.executor.on_granted(harness.grant(decision, ttl_s=-1)) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.DENIED, "approval_expired") and not (sandbox / "e.txt").exists()


async def test_hostile_path_is_refused_with_a_receipt(harness: Any) -> None:
    await harness.executor.on_decision(harness.decision("read", {"path": "../outside"}))
    assert harness.receipt("r1") == (Outcome.REFUSED, "path_outside_sandbox")


@pytest.mark.parametrize(
    ("state", "owner", "abandoned", "side_effect", "step"),
    [
        (ClaimState.NEW, "r1", False, SideEffectClass.READ_ONLY, Step.RUN),
        (ClaimState.ENDED, None, False, SideEffectClass.REVERSIBLE_WRITE, Step.ENDED),
        (ClaimState.DONE, "r1", False, SideEffectClass.READ_ONLY, Step.REPUBLISH),
        (ClaimState.DONE, "r0", False, SideEffectClass.READ_ONLY, Step.REPLAY),
        (ClaimState.MISMATCH, "r0", False, SideEffectClass.READ_ONLY, Step.REFUSE_REUSED),
        (ClaimState.INFLIGHT, "r1", False, SideEffectClass.REVERSIBLE_WRITE, Step.WAIT),
        (ClaimState.INFLIGHT, "r0", False, SideEffectClass.READ_ONLY, Step.WAIT),
        (ClaimState.INFLIGHT, "r1", True, SideEffectClass.REVERSIBLE_WRITE, Step.UNCERTAIN),
        (ClaimState.INFLIGHT, "r1", True, SideEffectClass.IRREVERSIBLE_WRITE, Step.UNCERTAIN),
        (ClaimState.INFLIGHT, "r1", True, SideEffectClass.READ_ONLY, Step.TAKE_OVER),
        (ClaimState.INFLIGHT, "r0", True, SideEffectClass.READ_ONLY, Step.REFUSE_IN_USE),
        (ClaimState.INFLIGHT, "r0", True, SideEffectClass.FINANCIAL, Step.REFUSE_IN_USE),
    ],
)
def test_next_step(
    state: ClaimState, owner: str | None, abandoned: bool, side_effect: SideEffectClass, step: Step
) -> None:
    claim = Claim(state=state, owner_request_id=owner, receipt=None, claimed_at_ms=1_000_000)
    assert next_step(claim, "r1", side_effect, abandoned) is step


async def _crashed_run(harness: Any, decision: Any, instance: str = "exec-dead") -> None:
    """A run another executor claimed (and recorded in the stream) before it died."""
    request = ClaimRequest("demo-agent", "k1", decision.request_hash, decision.request_id, instance, "n0", 600)
    assert (await harness.store.claim(request)).state is ClaimState.NEW
    assert await harness.new_instance(instance).claims.record(decision) is None


async def test_a_write_whose_executor_died_is_uncertain_at_once_and_never_rerun(harness: Any, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "f.txt", "content": "x"})
    await _crashed_run(harness, decision)
    assert await harness.executor.on_decision(decision) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.UNCERTAIN, "execution_interrupted")
    assert not (sandbox / "f.txt").exists()
    other = harness.decision("write", {"path": "f.txt", "content": "x"}, rid="r2")
    await harness.executor.on_decision(other)
    assert harness.receipt("r2") == (Outcome.REPLAYED, "execution_interrupted"), "the uncertain outcome is replayed"


async def test_a_write_of_a_live_executor_is_waited_for_then_other_requests_refused(harness: Any) -> None:
    decision = harness.decision("write", {"path": "g.txt", "content": "x"})
    await _crashed_run(harness, decision, instance="exec-live")
    await harness.store.heartbeat("exec-live", 60)
    settle = await harness.executor.on_decision(decision)
    assert isinstance(settle, Later) and 1.0 <= settle.delay_s <= 15.0 and harness.receipts == []
    await harness.store.heartbeat("exec-live", 0.001)
    await asyncio.sleep(0.01)
    other = harness.decision("write", {"path": "g.txt", "content": "x"}, rid="r2")
    assert await harness.executor.on_decision(other) is Settle.ACK
    assert harness.receipt("r2") == (Outcome.REFUSED, "idempotency_key_in_use")


async def test_an_expired_grant_after_a_crash_mid_write_is_uncertain_not_denied(harness: Any) -> None:
    decision = harness.decision("write", {"path": "h.txt", "content": "x"}, verdict=Verdict.NEEDS_APPROVAL)
    await _crashed_run(harness, decision)
    assert await harness.executor.on_granted(harness.grant(decision, ttl_s=-1)) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.UNCERTAIN, "execution_interrupted")


async def test_a_replay_decision_whose_record_is_gone_runs_nothing(harness: Any, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "i.txt", "content": "x"})
    replay = sign_event(
        msgspec.structs.replace(decision, reason_code="idempotent_replay", signature=""), harness.policy_key
    )
    assert await harness.executor.on_decision(replay) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.REFUSED, "replay_record_missing") and not (sandbox / "i.txt").exists()


async def test_a_stale_decision_runs_nothing_and_frees_its_key(harness: Any, sandbox: Path) -> None:
    old = harness.decision("write", {"path": "j.txt", "content": "x"}, age_s=7200)
    assert await harness.executor.on_decision(old) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.DENIED, "decision_expired") and not (sandbox / "j.txt").exists()
    fresh = harness.decision("write", {"path": "j.txt", "content": "x"}, rid="r2")
    assert await harness.executor.on_decision(fresh) is Settle.ACK
    assert harness.receipt("r2") == (Outcome.SUCCEEDED, "ok"), "the key of a call that never ran is free again"


async def test_a_grant_for_a_request_that_already_ended_runs_nothing(harness: Any, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "k.txt", "content": "x"}, verdict=Verdict.NEEDS_APPROVAL)
    rejected = ApprovalRejected(
        event_id="rej",
        occurred_at=harness.clock(),
        request_id=decision.request_id,
        principal=decision.principal,
        approval_id="ap-1",
        reason_code="approval_store_unavailable",
        reason="store down",
    )
    assert await harness.executor.on_rejected(sign_event(rejected, harness.approvals_key)) is Settle.ACK
    assert await harness.executor.on_granted(harness.grant(decision)) is Settle.TERM
    assert [r.outcome for r in harness.receipts] == [Outcome.DENIED] and not (sandbox / "k.txt").exists()


@pytest.mark.parametrize(
    ("code", "age_s", "granted"),
    [("forbidden", 0, True), ("unknown_principal", 0, True), ("descriptor_superseded", 60, False)],
)
async def test_a_call_the_policy_no_longer_allows_is_denied_at_dispatch(
    harness: Any, sandbox: Path, code: str, age_s: float, granted: bool
) -> None:
    harness.bus.answer = harness.answer_with(False, code)
    verdict = Verdict.NEEDS_APPROVAL if granted else Verdict.EXECUTE
    decision = harness.decision("write", {"path": "l.txt", "content": "x"}, verdict=verdict, age_s=age_s)
    work = harness.executor.on_granted(harness.grant(decision)) if granted else harness.executor.on_decision(decision)
    assert await work is Settle.ACK
    assert harness.receipt("r1") == (Outcome.DENIED, code) and not (sandbox / "l.txt").exists()
    assert len(harness.bus.rechecks) == 1


async def test_a_grant_over_the_rate_at_the_moment_of_effect_ends_denied_with_retry_after(
    harness: Any, sandbox: Path
) -> None:
    harness.bus.answer = harness.answer_with(False, "rate_limited", retry_after_s=7.25)
    decision = harness.decision("write", {"path": "q.txt", "content": "x"}, verdict=Verdict.NEEDS_APPROVAL)
    assert await harness.executor.on_granted(harness.grant(decision)) is Settle.ACK
    issued = harness.bus.receipts["r1"]
    assert (issued.outcome, issued.reason_code, issued.retry_after_s) == (Outcome.DENIED, "rate_limited", 7.25)
    assert not (sandbox / "q.txt").exists()
    harness.bus.answer = harness.answer_with(True)
    later = harness.decision("write", {"path": "q.txt", "content": "x"}, rid="r2", verdict=Verdict.NEEDS_APPROVAL)
    assert await harness.executor.on_granted(harness.grant(later)) is Settle.ACK
    assert harness.receipt("r2") == (Outcome.SUCCEEDED, "ok"), "the limited grant kept its idempotency key"


async def test_only_a_grant_is_admitted_at_its_recheck(harness: Any) -> None:
    granted = harness.decision("write", {"path": "s.txt", "content": "x"}, verdict=Verdict.NEEDS_APPROVAL)
    await harness.executor.on_granted(harness.grant(granted))
    await harness.executor.on_decision(harness.decision("read", {"path": "a.txt"}, rid="r2", key="k2", age_s=60))
    assert [q.admit_request_id for q in harness.bus.rechecks] == ["r1", None]
    assert harness.receipt("r2") == (Outcome.SUCCEEDED, "ok")


async def test_a_rate_limited_decision_gives_its_retry_after_to_the_receipt(harness: Any) -> None:
    decision = msgspec.structs.replace(
        harness.decision("read", {"path": "a.txt"}, verdict=Verdict.DENY),
        reason_code="rate_limited",
        retry_after_s=3.5,
        signature="",
    )
    assert await harness.executor.on_decision(sign_event(decision, harness.policy_key)) is Settle.ACK
    issued = harness.bus.receipts["r1"]
    assert (issued.outcome, issued.reason_code, issued.retry_after_s) == (Outcome.DENIED, "rate_limited", 3.5)


async def test_a_fresh_decision_is_not_rechecked(harness: Any) -> None:
    harness.bus.answer = harness.answer_with(False, "forbidden")
    await harness.executor.on_decision(harness.decision("read", {"path": "a.txt"}))
    assert harness.receipt("r1") == (Outcome.SUCCEEDED, "ok") and harness.bus.rechecks == []


@pytest.mark.parametrize("answer", ["silent", "forged", "other-request", "stale", "other-admission", "no-admission"])
async def test_without_a_valid_recheck_answer_nothing_runs_and_the_call_is_retried(
    harness: Any, sandbox: Path, answer: str
) -> None:
    valid = harness.answer_with(True)
    harness.bus.answer = {
        "silent": lambda query: None,
        "forged": harness.answer_with(True, key=Ed25519PrivateKey.generate()),
        "other-request": lambda query: valid(msgspec.structs.replace(query, request_hash="sha256:other")),
        "other-admission": lambda query: valid(msgspec.structs.replace(query, admit_request_id="r-other")),
        "no-admission": lambda query: valid(msgspec.structs.replace(query, admit_request_id=None)),
        "stale": lambda query: sign_event(
            msgspec.structs.replace(valid(query), checked_at=harness.clock() - timedelta(hours=1), signature=""),
            harness.policy_key,
        ),
    }[answer]
    decision = harness.decision("write", {"path": "m.txt", "content": "x"}, verdict=Verdict.NEEDS_APPROVAL)
    assert await harness.executor.on_granted(harness.grant(decision)) is Settle.RETRY
    assert harness.receipts == [] and not (sandbox / "m.txt").exists()
    harness.bus.answer = valid
    assert await harness.executor.on_granted(harness.grant(decision)) is Settle.ACK
    assert (sandbox / "m.txt").read_text() == "x"


async def test_a_key_the_index_lost_is_found_in_the_stream_and_never_runs_twice(harness: Any, sandbox: Path) -> None:
    first = harness.decision("write", {"path": "n.txt", "content": "x"})
    await harness.executor.on_decision(first)
    (sandbox / "n.txt").unlink()
    harness.store.lose_everything()
    await harness.store.set_epoch("after-a-partial-restore")  # the epoch survived, the record did not
    again = harness.decision("write", {"path": "n.txt", "content": "x"}, rid="r2")
    mismatched = harness.decision("write", {"path": "n.txt", "content": "y"}, rid="r3")
    for decision in (again, mismatched):
        assert await harness.executor.on_decision(decision) is Settle.ACK
    assert harness.receipt("r2") == (Outcome.REPLAYED, "ok") and harness.receipt("r3")[1] == "idempotency_key_reused"
    assert not (sandbox / "n.txt").exists(), "a write ran again after the index lost its record"


async def test_a_lost_index_refuses_every_claim_until_rebuilt(harness: Any, sandbox: Path) -> None:
    from effectgate.executor.background.rebuild import rebuild_index

    done = harness.decision("write", {"path": "o.txt", "content": "x"})
    await harness.executor.on_decision(done)
    harness.store.lose_everything()
    with pytest.raises(IndexLost):
        await harness.executor.on_decision(harness.decision("write", {"path": "o.txt", "content": "x"}, rid="r2"))
    assert await rebuild_index(harness.store, harness.bus, harness.clock, "exec-1", 3600)
    await harness.executor.on_decision(harness.decision("write", {"path": "o.txt", "content": "x"}, rid="r3"))
    assert harness.receipt("r3") == (Outcome.REPLAYED, "ok") and "r2" not in harness.bus.receipts


async def test_a_write_whose_request_already_has_a_receipt_does_not_run(harness: Any, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "p.txt", "content": "x"})
    from effectgate.executor.domain import undecided_receipt

    harness.bus.receipts["r1"] = undecided_receipt("demo-agent", "r1", harness.clock(), "ended by the backstop")
    assert await harness.executor.on_decision(decision) is Settle.ACK
    assert not (sandbox / "p.txt").exists() and harness.receipt("r1") == (Outcome.FAILED, "not_decided")


async def test_a_signed_decision_whose_hash_does_not_match_its_request_runs_nothing(
    harness: Any, sandbox: Path
) -> None:
    decision = harness.decision("write", {"path": "q.txt", "content": "x"})
    unbound = msgspec.structs.replace(decision, request_hash="sha256:" + "0" * 64, signature="")
    assert await harness.executor.on_decision(sign_event(unbound, harness.policy_key)) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.REFUSED, "hash_mismatch") and not (sandbox / "q.txt").exists()


async def test_a_descriptor_changed_since_the_decision_runs_nothing(harness: Any, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "s.txt", "content": "x"})
    changed = msgspec.structs.replace(harness.descriptor, timeout_s=harness.descriptor.timeout_s + 1)
    harness.executor.descriptors.by_name[changed.name] = changed  # same name and version, other content
    assert await harness.executor.on_decision(decision) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.REFUSED, "descriptor_mismatch") and not (sandbox / "s.txt").exists()


async def test_a_receipt_the_index_cannot_store_is_still_published(
    harness: Any, sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unavailable(*args: Any) -> bool:
        raise IdempotencyStoreUnavailable("idempotency_store_unavailable", "redis down")

    monkeypatch.setattr(harness.store, "complete", unavailable)
    decision = harness.decision("write", {"path": "t.txt", "content": "x"})
    assert await harness.executor.on_decision(decision) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.SUCCEEDED, "ok") and (sandbox / "t.txt").read_text() == "x"
    (sandbox / "t.txt").unlink()
    assert await harness.executor.on_decision(decision) is Settle.ACK, "a redelivery"
    assert not (sandbox / "t.txt").exists() and harness.receipt("r1") == (Outcome.SUCCEEDED, "ok")


async def test_a_write_redelivered_after_the_index_lost_its_claim_mid_run_is_uncertain(
    harness: Any, sandbox: Path
) -> None:
    decision = harness.decision("write", {"path": "u.txt", "content": "x"})
    await _crashed_run(harness, decision)
    harness.store.lose_everything()
    await harness.store.set_epoch("after-a-partial-restore")  # the claim survives only in the stream
    assert await harness.executor.on_decision(decision) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.UNCERTAIN, "execution_interrupted")
    assert not (sandbox / "u.txt").exists(), "a write that may have run was run again"


async def test_other_arguments_under_a_key_only_the_stream_remembers_are_refused(harness: Any, sandbox: Path) -> None:
    await harness.executor.on_decision(harness.decision("write", {"path": "v.txt", "content": "x"}))
    harness.store.lose_everything()
    await harness.store.set_epoch("after-a-partial-restore")
    other = harness.decision("write", {"path": "v.txt", "content": "y"}, rid="r2")
    assert await harness.executor.on_decision(other) is Settle.ACK
    assert harness.receipt("r2") == (Outcome.REFUSED, "idempotency_key_reused")
    assert (sandbox / "v.txt").read_text() == "x" and harness.bus.receipts["r2"].result is None


async def test_a_rebuilt_index_waits_for_a_run_that_is_still_live(harness: Any) -> None:
    from effectgate.executor.background.rebuild import rebuild_index

    await _crashed_run(harness, harness.decision("write", {"path": "w.txt", "content": "x"}), instance="exec-live")
    harness.store.lose_everything()
    assert await rebuild_index(harness.store, harness.bus, harness.clock, "exec-1", 3600)
    await harness.store.heartbeat("exec-live", 60)
    retry = harness.decision("write", {"path": "w.txt", "content": "x"}, rid="r2")
    settle = await harness.executor.on_decision(retry)
    assert isinstance(settle, Later) and harness.receipts == [], "the key of a live run was not waited for"


async def test_a_rebuild_whose_index_is_lost_again_midway_starts_over(harness: Any) -> None:
    from effectgate.executor.background.rebuild import rebuild_index

    for n in range(2):
        await harness.executor.on_decision(
            harness.decision("write", {"path": f"q{n}.txt", "content": "x"}, rid=f"r{n}", key=f"k{n}")
        )
    claims = list(harness.bus.claims_made.values())
    harness.store.lose_everything()

    class LosingBus:
        async def claims(self) -> Any:
            yield claims[0]
            harness.store.lose_everything()  # Redis restarts empty again, mid-rebuild
            yield claims[1]

        async def receipt(self, principal: str, request_id: str) -> Any:
            return await harness.bus.receipt(principal, request_id)

    assert not await rebuild_index(harness.store, LosingBus(), harness.clock, "exec-1", 3600)
    assert not await harness.store.has_epoch(), "a half-rebuilt index was declared complete"
    assert await rebuild_index(harness.store, harness.bus, harness.clock, "exec-1", 3600)
    for n in range(2):
        await harness.executor.on_decision(
            harness.decision("write", {"path": f"q{n}.txt", "content": "x"}, rid=f"s{n}", key=f"k{n}")
        )
        assert harness.receipt(f"s{n}") == (Outcome.REPLAYED, "ok")


async def test_an_executor_whose_lease_lapsed_starts_no_write_and_frees_the_key(harness: Any, sandbox: Path) -> None:
    harness.executor.lease = lambda: False
    decision = harness.decision("write", {"path": "lease.txt", "content": "x"})
    assert await harness.executor.on_decision(decision) is Settle.RETRY
    assert not (sandbox / "lease.txt").exists() and harness.receipts == [] and harness.bus.claims_made == {}
    harness.executor.lease = lambda: True
    assert await harness.executor.on_decision(decision) is Settle.ACK
    assert (sandbox / "lease.txt").read_text() == "x"


def test_the_lease_lapses_without_heartbeats() -> None:
    from effectgate.executor.background.upkeep import Lease

    now = [100.0]
    lease = Lease(valid_s=3.0, clock=lambda: now[0])
    assert not lease.held(), "a lease never renewed is not held"
    lease.renewed()
    now[0] += 2.9
    assert lease.held()
    now[0] += 0.2
    assert not lease.held()


async def test_two_grants_of_one_key_at_once_run_it_once_and_replay_it(harness: Any, sandbox: Path) -> None:
    """Two requests joined to one approval get their grants together: the second waits, then replays the first."""
    slow = harness.bus.recheck

    async def slow_recheck(query: Any) -> Any:
        await asyncio.sleep(0.05)  # the policy's answer takes a moment: the other grant arrives meanwhile
        return await slow(query)

    harness.bus.recheck = slow_recheck
    arguments = {"path": "joined.txt", "content": "once"}
    first, second = (
        harness.decision("write", arguments, rid=rid, verdict=Verdict.NEEDS_APPROVAL) for rid in ("r1", "r2")
    )
    settled = await asyncio.gather(*(harness.executor.on_granted(harness.grant(d)) for d in (first, second)))
    assert settled[0] is Settle.ACK and isinstance(settled[1], Later), settled
    assert await harness.executor.on_granted(harness.grant(second)) is Settle.ACK
    assert harness.receipt("r1") == (Outcome.SUCCEEDED, "ok") and harness.receipt("r2") == (Outcome.REPLAYED, "ok")
    assert (sandbox / "joined.txt").read_text() == "once"
