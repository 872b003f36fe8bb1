"""The executor workflow over in-memory ports and a real sandboxed file system."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from toolgate.executor.adapters.file_system import FileSystemTool
from toolgate.executor.adapters.tool_host import LocalToolHost
from toolgate.executor.domain import Step, next_step, scrub
from toolgate.executor.ports import Claim, ClaimState, InMemoryIdempotencyStore
from toolgate.executor.service import Executor
from toolgate.shared.descriptors import ToolDescriptor, descriptor_digest
from toolgate.shared.events import (
    ApprovalGranted,
    ApprovalRejected,
    BoundRequest,
    DecisionMade,
    ReceiptIssued,
    request_hash,
)
from toolgate.shared.settle import Settle
from toolgate.shared.signing import sign_event
from toolgate.shared.vocabulary import Outcome, SideEffectClass, Verdict

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
POLICY, APPROVALS = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()


class Descriptors:
    def __init__(self, descriptor: ToolDescriptor) -> None:
        self.descriptor = descriptor

    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        return self.descriptor if tool == self.descriptor.name else None


class Harness:
    def __init__(self, descriptor: ToolDescriptor, sandbox: Path) -> None:
        self.receipts: list[ReceiptIssued] = []
        self.decisions: dict[str, DecisionMade] = {}
        self.descriptor = descriptor
        self.executor = Executor(
            store=InMemoryIdempotencyStore(),
            descriptors=Descriptors(descriptor),
            tools=LocalToolHost(FileSystemTool(sandbox), None),
            policy_key=POLICY.public_key(),
            approvals_key=APPROVALS.public_key(),
            publish=self._publish,
            fetch_decision=self._fetch,
            fetch_receipt=self._fetch_receipt,
            clock=lambda: NOW,
        )

    async def _publish(self, subject: str, issued: ReceiptIssued) -> object:
        self.receipts.append(issued)
        return None

    async def _fetch_receipt(self, principal: str, request_id: str) -> ReceiptIssued | None:
        return next((r for r in self.receipts if r.request_id == request_id), None)

    async def _fetch(self, principal: str, request_id: str) -> DecisionMade | None:
        return self.decisions.get(request_id)

    def decision(
        self,
        operation: str,
        arguments: dict[str, Any],
        rid: str = "r1",
        key: str = "k1",
        verdict: Verdict = Verdict.EXECUTE,
    ) -> DecisionMade:
        bound = BoundRequest(
            principal="demo-agent",
            tool="file_system",
            version="1.0.0",
            descriptor_digest=descriptor_digest(self.descriptor),
            operation=operation,
            arguments=arguments,
        )
        decision = DecisionMade(
            event_id=f"decision:{rid}",
            occurred_at=NOW,
            request_id=rid,
            principal="demo-agent",
            verdict=verdict,
            reason_code="x",
            reason="x",
            idempotency_key=key,
            request=bound,
            request_hash=request_hash(bound),
            side_effect_class=self.descriptor.operations[operation].side_effect_class,
            timeout_s=5.0,
        )
        signed = sign_event(decision, POLICY)
        self.decisions[rid] = signed
        return signed


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    root = tmp_path / "sandbox"
    root.mkdir()
    (root / "a.txt").write_text("alpha")
    return root


@pytest.fixture
def harness(repo_root: Path, sandbox: Path) -> Harness:
    data = (repo_root / "deploy" / "tools" / "file_system.json").read_bytes()
    return Harness(msgspec.json.decode(data, type=ToolDescriptor), sandbox)


async def test_execute_runs_once_and_redelivery_republishes(harness: Harness, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "b.txt", "content": "one"})
    assert await harness.executor.on_decision(decision) is Settle.ACK
    (sandbox / "b.txt").unlink()
    assert await harness.executor.on_decision(decision, delivery=2) is Settle.ACK
    assert not (sandbox / "b.txt").exists(), "a redelivered decision ran the tool again"
    assert [r.outcome for r in harness.receipts] == [Outcome.SUCCEEDED, Outcome.SUCCEEDED]
    assert harness.receipts[0] == harness.receipts[1]


async def test_same_key_other_request_is_replayed_and_other_arguments_refused(harness: Harness) -> None:
    await harness.executor.on_decision(harness.decision("read", {"path": "a.txt"}))
    await harness.executor.on_decision(harness.decision("read", {"path": "a.txt"}, rid="r2"))
    await harness.executor.on_decision(harness.decision("write", {"path": "a.txt", "content": "z"}, rid="r3"))
    outcomes = [(r.outcome, r.reason_code) for r in harness.receipts]
    assert outcomes[1:] == [(Outcome.REPLAYED, "ok"), (Outcome.REFUSED, "idempotency_key_reused")]
    assert harness.receipts[1].result == harness.receipts[0].result and harness.receipts[1].replay_of == "r1"


async def test_forged_decision_runs_nothing_and_issues_no_receipt(harness: Harness, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "c.txt", "content": "x"})
    forged = sign_event(decision, Ed25519PrivateKey.generate())
    assert await harness.executor.on_decision(forged) is Settle.TERM
    swapped = msgspec.structs.replace(decision, request=msgspec.structs.replace(decision.request, arguments={}))
    assert await harness.executor.on_decision(swapped) is Settle.TERM
    assert harness.receipts == [] and not (sandbox / "c.txt").exists()


async def test_deny_and_refuse_end_in_receipts(harness: Harness) -> None:
    await harness.executor.on_decision(harness.decision("read", {"path": "a.txt"}, verdict=Verdict.DENY))
    await harness.executor.on_decision(harness.decision("read", {"path": "a.txt"}, rid="r2", verdict=Verdict.REFUSE))
    assert [r.outcome for r in harness.receipts] == [Outcome.DENIED, Outcome.REFUSED]


def _grant(
    decision: DecisionMade, digest: str, key: Ed25519PrivateKey = APPROVALS, ttl_s: float = 60
) -> ApprovalGranted:
    grant = ApprovalGranted(
        event_id="g",
        occurred_at=NOW,
        request_id=decision.request_id,
        principal=decision.principal,
        approval_id="ap-1",
        request_hash=digest,
        approver="alice",
        expires_at=NOW + timedelta(seconds=ttl_s),
    )
    return sign_event(grant, key)


async def test_grant_runs_only_the_approved_arguments(harness: Harness, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "d.txt", "content": "approved"}, verdict=Verdict.NEEDS_APPROVAL)
    assert await harness.executor.on_decision(decision) is Settle.ACK and harness.receipts == []
    assert decision.request is not None
    other = msgspec.structs.replace(decision.request, arguments={"path": "d.txt", "content": "other"})
    assert await harness.executor.on_granted(_grant(decision, request_hash(other))) is Settle.TERM
    assert (
        await harness.executor.on_granted(_grant(decision, decision.request_hash or "", Ed25519PrivateKey.generate()))
        is Settle.TERM
    )
    assert not (sandbox / "d.txt").exists() and harness.receipts == []
    assert await harness.executor.on_granted(_grant(decision, decision.request_hash or "")) is Settle.ACK
    assert (sandbox / "d.txt").read_text() == "approved" and harness.receipts[0].outcome is Outcome.SUCCEEDED


async def test_expired_grant_is_denied(harness: Harness, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "e.txt", "content": "x"}, verdict=Verdict.NEEDS_APPROVAL)
    assert await harness.executor.on_granted(_grant(decision, decision.request_hash or "", ttl_s=-1)) is Settle.ACK
    assert (harness.receipts[0].outcome, harness.receipts[0].reason_code) == (Outcome.DENIED, "approval_expired")
    assert not (sandbox / "e.txt").exists()


async def test_hostile_path_is_refused_with_a_receipt(harness: Harness) -> None:
    await harness.executor.on_decision(harness.decision("read", {"path": "../outside"}))
    assert (harness.receipts[0].outcome, harness.receipts[0].reason_code) == (Outcome.REFUSED, "path_outside_sandbox")


@pytest.mark.parametrize(
    ("state", "owner", "age_ms", "side_effect", "step"),
    [
        (ClaimState.NEW, "r1", 0, SideEffectClass.READ_ONLY, Step.RUN),
        (ClaimState.DONE, "r1", 0, SideEffectClass.READ_ONLY, Step.REPUBLISH),
        (ClaimState.DONE, "r0", 0, SideEffectClass.READ_ONLY, Step.REPLAY),
        (ClaimState.MISMATCH, "r0", 0, SideEffectClass.READ_ONLY, Step.REFUSE_REUSED),
        (ClaimState.INFLIGHT, "r1", 10, SideEffectClass.REVERSIBLE_WRITE, Step.WAIT),
        (ClaimState.INFLIGHT, "r1", 99_999, SideEffectClass.REVERSIBLE_WRITE, Step.UNCERTAIN),
        (ClaimState.INFLIGHT, "r1", 99_999, SideEffectClass.READ_ONLY, Step.TAKE_OVER),
        (ClaimState.INFLIGHT, "r0", 99_999, SideEffectClass.READ_ONLY, Step.REFUSE_IN_USE),
    ],
)
def test_next_step(state: ClaimState, owner: str, age_ms: int, side_effect: SideEffectClass, step: Step) -> None:
    claim = Claim(state=state, owner_request_id=owner, receipt=None, claimed_at_ms=1_000_000)
    assert next_step(claim, "r1", side_effect, 1_000_000 + age_ms, 35_000) is step


def test_scrub_replaces_credentials_with_hash_references() -> None:
    text = "key AKIAABCDEFGHIJKLMNOP and token: s3cr3tvalue and ghp_" + "a" * 30
    cleaned = scrub({"out": [text], "n": 3})
    assert "AKIA" not in str(cleaned) and "s3cr3tvalue" not in str(cleaned) and "ghp_" not in str(cleaned)
    assert cleaned["n"] == 3 and str(cleaned).count("[redacted sha256:") == 3


async def test_expired_grant_after_a_crash_mid_write_is_uncertain_not_denied(harness: Harness, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "f.txt", "content": "x"}, verdict=Verdict.NEEDS_APPROVAL)
    store = harness.executor.store
    assert decision.request_hash is not None
    await store.claim("demo-agent", "k1", decision.request_hash, decision.request_id, 60)  # the crashed run
    harness.executor.stale_grace_s = -10  # the crashed run is long past its timeout
    assert await harness.executor.on_granted(_grant(decision, decision.request_hash, ttl_s=-1)) is Settle.ACK
    assert (harness.receipts[0].outcome, harness.receipts[0].reason_code) == (
        Outcome.UNCERTAIN,
        "execution_interrupted",
    )


async def test_a_replay_decision_whose_record_is_gone_runs_nothing(harness: Harness, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "g.txt", "content": "x"})
    replay = sign_event(msgspec.structs.replace(decision, reason_code="idempotent_replay", signature=""), POLICY)
    assert await harness.executor.on_decision(replay) is Settle.ACK
    assert (harness.receipts[0].outcome, harness.receipts[0].reason_code) == (Outcome.REFUSED, "replay_record_missing")
    assert not (sandbox / "g.txt").exists()


async def test_a_stale_decision_runs_nothing(harness: Harness, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "h.txt", "content": "x"})
    old = sign_event(msgspec.structs.replace(decision, occurred_at=NOW - timedelta(hours=2), signature=""), POLICY)
    assert await harness.executor.on_decision(old) is Settle.ACK
    assert (harness.receipts[0].outcome, harness.receipts[0].reason_code) == (Outcome.DENIED, "decision_expired")
    assert not (sandbox / "h.txt").exists()


async def test_a_grant_for_a_request_that_already_ended_runs_nothing(harness: Harness, sandbox: Path) -> None:
    decision = harness.decision("write", {"path": "i.txt", "content": "x"}, verdict=Verdict.NEEDS_APPROVAL)
    rejected = ApprovalRejected(
        event_id="rej",
        occurred_at=NOW,
        request_id=decision.request_id,
        principal=decision.principal,
        approval_id="ap-1",
        reason_code="approval_store_unavailable",
        reason="store down",
    )
    assert await harness.executor.on_rejected(sign_event(rejected, APPROVALS)) is Settle.ACK
    assert await harness.executor.on_granted(_grant(decision, decision.request_hash or "")) is Settle.TERM
    assert [r.outcome for r in harness.receipts] == [Outcome.DENIED] and not (sandbox / "i.txt").exists()
