"""The executor workflow: verify, claim the idempotency key, run at most once, issue the receipt.

A call runs only on a policy-signed ``execute`` decision, or on an approvals-signed grant
whose request hash equals the hash recomputed from the decision's request — the bytes
that will run (guarantees 4 and 6, docs/architecture.md). Before a new run starts:

1. the key is claimed in the index (Redis, atomic); a claim that is not new is followed
   (replay, refuse, wait for a live owner, or ``uncertain`` for an abandoned write);
2. permission is still fresh: the approval has not expired, the decision is younger than
   ``decision_max_age_s``; a grant, or a decision older than ``recheck_after_s``, is
   re-checked with the policy service at this moment (:mod:`toolgate.contracts.recheck`);
3. for a write, the request has no receipt yet (the backstop may have ended it), and its
   claim is recorded durably in the stream (:class:`EffectClaimed`, first on its
   subject): a claim the index lost is found there, and the earlier claim wins.

The receipt is stored in the index before it is published, so a crash between the two
republishes the stored receipt and never re-runs the tool. Anything that ends a request
without a run releases its claim, so the agent may retry the key.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from toolgate.contracts.catalog import Subjects
from toolgate.contracts.descriptors import ToolDescriptor, descriptor_digest
from toolgate.contracts.events import ApprovalGranted, ApprovalRejected, DecisionMade, ReceiptIssued, request_hash
from toolgate.contracts.security import SecurityKind
from toolgate.contracts.signing import verify_event
from toolgate.contracts.vocabulary import Outcome, SideEffectClass, Verdict
from toolgate.executor.claims import DurableClaims
from toolgate.executor.domain import Step, effect_id, next_step, receipt, replay_receipt, stale_at_ms
from toolgate.executor.errors import ExecutorError
from toolgate.executor.forgery import report_event
from toolgate.executor.permission import Permission, RecheckUnavailable
from toolgate.executor.ports import Claim, ClaimRequest, ClaimState, DescriptorSource, IdempotencyStore, Outlet
from toolgate.executor.running import Runner
from toolgate.executor.timing import Timing
from toolgate.executor.waiting_on import waiting_on
from toolgate.shared.metrics import record_call, record_stage
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.settle import Later, Settle, Settlement

__all__ = ["DescriptorSource", "Executor", "Keys", "Timing"]

log = logging.getLogger("toolgate.executor")
_receipt_decoder = msgspec.json.Decoder(ReceiptIssued)
MAX_WAIT_S = 15.0
"""Longest pause before looking again at a key a live executor is running, seconds."""


@dataclass(frozen=True)
class Keys:
    """The public keys the executor verifies: decisions and re-checks (policy), approvals."""

    policy: Ed25519PublicKey
    approvals: Ed25519PublicKey


@dataclass
class Executor:
    """The executor workflow; every collaborator is injected.

    ``bus`` is an :class:`~toolgate.executor.ports.Outlet`: a receipt is sealed (scrubbed of
    secrets) before it is stored in the index or published.
    """

    store: IdempotencyStore
    bus: Outlet
    descriptors: DescriptorSource
    runner: Runner
    permission: Permission
    claims: DurableClaims
    keys: Keys
    clock: Callable[[], datetime]
    instance: str
    timing: Timing = field(default_factory=Timing)
    lease: Callable[[], bool] = field(default=lambda: True)
    reporter: SecurityReporter = field(default_factory=lambda: SecurityReporter("executor"))
    _running: set[tuple[str, str]] = field(default_factory=set, init=False)

    async def on_decision(self, decision: DecisionMade) -> Settlement:
        """Handle a decision: approval → wait; forged → term; deny/refuse → receipt; execute → run.

        A ``needs_approval`` decision is passed over unverified: nothing acts on it here (a
        grant is what runs it, and the decision is read back and verified with the grant).
        """
        if decision.verdict is Verdict.NEEDS_APPROVAL:
            return Settle.ACK
        if not verify_event(decision, self.keys.policy):
            subject = Subjects.decision(decision.principal, decision.request_id)
            report_event(self.reporter, SecurityKind.DECISION_FORGED, decision, subject, "not signed by the policy key")
            return Settle.TERM
        if decision.verdict is Verdict.EXECUTE:
            return await self.execute(decision)
        outcome = Outcome.REFUSED if decision.verdict is Verdict.REFUSE else Outcome.DENIED
        return await self._issue(decision, outcome, decision.reason_code, decision.reason, decision.retry_after_s)

    async def on_granted(self, grant: ApprovalGranted) -> Settlement:
        """Run a granted call after checking the grant binds exactly the decided request.

        Its receipt names the grant's approval (:mod:`toolgate.executor.waiting_on`).
        """
        with waiting_on(grant.principal, grant.request_id, grant.approval_id):
            return await self._on_granted(grant)

    async def _on_granted(self, grant: ApprovalGranted) -> Settlement:
        decision = await self.approved_decision(grant)
        if decision is None or decision.request is None or grant.request_hash != request_hash(decision.request):
            if decision is not None:
                self._forged_approval(grant, "the grant binds other content than the request's decision")
            return Settle.TERM
        if await self.bus.receipt(decision.principal, decision.request_id) is not None:
            return Settle.TERM  # the request already ended: run nothing
        record_stage("approval", (grant.occurred_at - decision.occurred_at).total_seconds())
        return await self.execute(decision, grant)

    async def on_rejected(self, event: ApprovalRejected) -> Settlement:
        """End a request whose approval was rejected or expired; its receipt names the approval."""
        decision = await self.approved_decision(event)
        if decision is None:
            return Settle.TERM
        record_stage("approval", (event.occurred_at - decision.occurred_at).total_seconds())
        with waiting_on(event.principal, event.request_id, event.approval_id):
            return await self._issue(decision, Outcome.DENIED, event.reason_code, event.reason)

    async def approved_decision(self, event: ApprovalGranted | ApprovalRejected) -> DecisionMade | None:
        """The signed ``needs_approval`` decision a signed approval event refers to, else ``None``."""
        if not verify_event(event, self.keys.approvals):
            return self._forged_approval(event, "not signed by the approvals key")
        decision = await self.bus.decision(event.principal, event.request_id)
        if decision is None or not verify_event(decision, self.keys.policy):
            self._unverified(event, decision)
            return None
        if decision.verdict is not Verdict.NEEDS_APPROVAL:
            return self._forged_approval(event, f"the request's decision is {decision.verdict}, not needs_approval")
        return decision

    def _unverified(self, event: ApprovalGranted | ApprovalRejected, decision: DecisionMade | None) -> None:
        """Report an approval event whose request has no decision, or a first decision that does not verify."""
        if decision is None:
            self._forged_approval(event, "the request has no decision")
            return
        subject = Subjects.decision(decision.principal, decision.request_id)
        detail = "the first decision of the request is not signed by the policy key"
        report_event(self.reporter, SecurityKind.DECISION_FORGED, decision, subject, detail)

    def _forged_approval(self, event: ApprovalGranted | ApprovalRejected, detail: str) -> DecisionMade | None:
        """Report ``event`` as ``approval_forged``; ``None`` (no decision to act on)."""
        kind = "granted" if isinstance(event, ApprovalGranted) else "rejected"
        subject = Subjects.approval(kind, event.principal, event.request_id)
        report_event(self.reporter, SecurityKind.APPROVAL_FORGED, event, subject, detail)
        return None

    async def end(
        self, decision: DecisionMade, grant: ApprovalGranted | None = None, approval_id: str | None = None
    ) -> Settlement:
        """End a request that outlived its deadlines without starting anything new.

        Nothing started: the request is marked ended (no later delivery can run it) and
        ends ``failed`` (or ``denied`` when it was waiting for an approval). A run started:
        its claim decides (a stored receipt is republished, an abandoned write becomes
        ``uncertain``, a live run is waited for). The receipt names the grant's approval,
        or ``approval_id`` (the one opened and never answered).
        """
        waited = grant.approval_id if grant is not None else approval_id
        with waiting_on(decision.principal, decision.request_id, waited):
            return await self._end(decision, grant)

    async def _end(self, decision: DecisionMade, grant: ApprovalGranted | None) -> Settlement:
        if await self.bus.receipt(decision.principal, decision.request_id) is not None:
            return Settle.ACK
        if await self.store.end_request(decision.principal, decision.request_id, self.timing.idempotency_ttl_s):
            return await self._issue(decision, *_never_ran(decision, grant))
        if decision.verdict is not Verdict.EXECUTE and grant is None:
            return Settle.ACK  # a run started under a grant this caller does not hold: its owner ends it
        return await self.execute(decision, grant, final=True)

    def abort(self) -> None:
        """Shutdown: end every run still in progress now (``uncertain`` writes, ``failed`` reads)."""
        self.runner.abort()

    async def execute(
        self, decision: DecisionMade, grant: ApprovalGranted | None = None, final: bool = False
    ) -> Settlement:
        """Run the decided call at most once per (principal, idempotency key).

        Args:
            decision: a verified ``execute`` or ``needs_approval`` decision.
            grant: the verified grant, for a call that needed approval.
            final: never start a run (the backstop or a give-up is ending the request).

        Raises:
            IdempotencyStoreUnavailable / IndexLost: the index cannot answer (transient: retry).
        """
        bound = decision.request
        if bound is None or not decision.idempotency_key or decision.request_hash != request_hash(bound):
            reason = "the decided request does not hash to the decision's request hash"
            return await self._issue(decision, Outcome.REFUSED, "hash_mismatch", reason)
        descriptor = await self.descriptors.get(bound.tool, bound.version)
        if descriptor is None or descriptor_digest(descriptor) != bound.descriptor_digest:
            reason = f"{bound.tool}@{bound.version} is not the descriptor that was decided"
            return await self._issue(decision, Outcome.REFUSED, "descriptor_mismatch", reason)
        claim = await self._claim(decision)
        if claim.state is ClaimState.INFLIGHT and (done := await self._stream_receipt(claim, decision)) is not None:
            claim = done
        step = next_step(claim, decision.request_id, _side_effect(decision), await self._abandoned(claim, decision))
        if step is Step.WAIT:
            return Later(self._wait_s(claim, decision))
        if step in (Step.RUN, Step.TAKE_OVER):
            return await self._start(step, claim, decision, descriptor, grant, final)
        return await self._follow(step, claim, decision)

    async def _claim(self, decision: DecisionMade) -> Claim:
        request = ClaimRequest(
            principal=decision.principal,
            idempotency_key=decision.idempotency_key or "",
            fingerprint=decision.request_hash or "",
            request_id=decision.request_id,
            instance=self.instance,
            nonce=uuid.uuid4().hex,
            ttl_s=self.timing.idempotency_ttl_s,
        )
        return await self.store.claim(request)

    async def _stream_receipt(self, claim: Claim, decision: DecisionMade) -> Claim | None:
        """An in-flight record whose owner's receipt is in the stream is done (the index missed it)."""
        if claim.owner_request_id is None:
            return None
        found = await self.bus.receipt(decision.principal, claim.owner_request_id)
        if found is None:
            return None
        return Claim(ClaimState.DONE, claim.owner_request_id, msgspec.json.encode(found), claim.claimed_at_ms)

    async def _abandoned(self, claim: Claim, decision: DecisionMade) -> bool:
        if claim.state is not ClaimState.INFLIGHT:
            return False
        if self._now_ms() >= self._stale_at(claim, decision):
            return True
        if claim.instance == self.instance:
            return (decision.principal, decision.idempotency_key or "") not in self._running
        return claim.instance is None or not await self.store.is_alive(claim.instance)

    def _now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)

    def _stale_at(self, claim: Claim, decision: DecisionMade) -> int:
        return stale_at_ms(claim, decision.timeout_s or 30.0, self.timing.stale_grace_s)

    def _wait_s(self, claim: Claim, decision: DecisionMade) -> float:
        remaining_s = (self._stale_at(claim, decision) - self._now_ms()) / 1000
        return min(max(remaining_s, 1.0), MAX_WAIT_S)

    async def _start(
        self,
        step: Step,
        claim: Claim,
        decision: DecisionMade,
        descriptor: ToolDescriptor,
        grant: ApprovalGranted | None,
        final: bool,
    ) -> Settlement:
        """Check and run a call whose key this handler holds now.

        The key counts as running in this instance from its claim on (``_running``), not
        only once the tool starts: another request of the same key that arrives during the
        re-check (two grants of one approval) waits for this one instead of taking its
        live claim for an abandoned one.
        """
        key = (decision.principal, decision.idempotency_key or "")
        self._running.add(key)
        try:
            return await self._checked_start(step, claim, decision, descriptor, grant, final)
        finally:
            self._running.discard(key)

    async def _checked_start(
        self,
        step: Step,
        claim: Claim,
        decision: DecisionMade,
        descriptor: ToolDescriptor,
        grant: ApprovalGranted | None,
        final: bool,
    ) -> Settlement:
        if final:
            return await self._not_started(decision, *_never_ran(decision, grant))
        try:
            stop = await self.permission.check(decision, grant)
        except RecheckUnavailable:
            await self._release(decision)
            return Settle.RETRY
        if stop is not None:
            return await self._not_started(decision, *stop)
        if step is Step.TAKE_OVER:
            await self.store.take_over(
                decision.principal, decision.idempotency_key or "", claim.owner_request_id or "", decision.request_id
            )
        if _side_effect(decision) is not SideEffectClass.READ_ONLY:
            if not self.lease():  # this instance may be taken for dead: start nothing, try again later
                await self._release(decision)
                return Settle.RETRY
            if await self.bus.receipt(decision.principal, decision.request_id) is not None:
                await self._release(decision)
                return Settle.ACK
            if (earlier := await self._claim_durably(decision)) is not None:
                return await self._follow(*earlier, decision)
        return await self._run(decision, descriptor, grant)

    async def _claim_durably(self, decision: DecisionMade) -> tuple[Step, Claim] | None:
        """Record the write's claim in the stream; if that fails, nothing ran: free the key and retry."""
        try:
            return await self.claims.record(decision)
        except Exception:
            await self._release(decision)
            raise

    async def _run(
        self, decision: DecisionMade, descriptor: ToolDescriptor, grant: ApprovalGranted | None
    ) -> Settlement:
        issued = await self.runner.run(decision, descriptor, grant)
        return await self._complete(decision, issued)

    async def _follow(self, step: Step, claim: Claim, decision: DecisionMade) -> Settlement:
        if step is Step.ENDED:
            return Settle.ACK
        if step in (Step.REPUBLISH, Step.REPLAY):
            stored = _receipt_decoder.decode(claim.receipt or b"")
            return await self._send(
                stored if step is Step.REPUBLISH else replay_receipt(decision, self.clock(), stored)
            )
        if step is Step.REFUSE_REUSED:
            reason = (
                "idempotency key was used with another request (other arguments, or another tool version or descriptor)"
            )
            return await self._issue(decision, Outcome.REFUSED, "idempotency_key_reused", reason)
        if step is Step.REFUSE_IN_USE:
            reason = f"request {claim.owner_request_id} holds this key and its outcome is unknown"
            return await self._issue(decision, Outcome.REFUSED, "idempotency_key_in_use", reason)
        return await self._complete(decision, self._interrupted(decision))

    def _interrupted(self, decision: DecisionMade) -> ReceiptIssued:
        reason = "the run of this write was interrupted; whether its effect happened is unknown — reconcile it"
        effect = effect_id(decision.principal, decision.idempotency_key or "")
        return receipt(decision, self.clock(), Outcome.UNCERTAIN, "execution_interrupted", reason, effect_id=effect)

    async def _release(self, decision: DecisionMade) -> None:
        await self.store.release(decision.principal, decision.idempotency_key or "", decision.request_id)

    async def _not_started(
        self, decision: DecisionMade, outcome: Outcome, code: str, reason: str, retry_after_s: float | None = None
    ) -> Settlement:
        await self._release(decision)
        return await self._issue(decision, outcome, code, reason, retry_after_s)

    async def _complete(self, decision: DecisionMade, issued: ReceiptIssued) -> Settlement:
        """Store the receipt in the index, then publish it; the stream is the record either way.

        A store failure here must not turn into a retry: the tool ran, and a redelivery
        would find its own claim abandoned and end it ``uncertain``. The published receipt
        completes the record instead (a later claim finds it in the stream).
        """
        key, ttl_s = decision.idempotency_key or "", self.timing.idempotency_ttl_s
        issued = await self.bus.seal(issued)
        try:
            await self.store.complete(decision.principal, key, decision.request_id, msgspec.json.encode(issued), ttl_s)
        except ExecutorError as error:
            log.error("%s: receipt not stored in the index (%s); publishing it", decision.request_id, error.reason_code)
        return await self._send(issued, decision)

    async def _issue(
        self, decision: DecisionMade, outcome: Outcome, code: str, reason: str, retry_after_s: float | None = None
    ) -> Settlement:
        issued = receipt(decision, self.clock(), outcome, code, reason, retry_after_s=retry_after_s)
        return await self._send(issued, decision)

    async def _send(self, issued: ReceiptIssued, decision: DecisionMade | None = None) -> Settlement:
        """Publish ``issued``; a receipt stored now for ``decision`` records the call's duration."""
        if await self.bus.publish_receipt(issued) and decision is not None:
            record_call(decision.occurred_at, issued.occurred_at)
        return Settle.ACK


def _side_effect(decision: DecisionMade) -> SideEffectClass:
    return decision.side_effect_class or SideEffectClass.SECURITY_SENSITIVE


def _never_ran(decision: DecisionMade, grant: ApprovalGranted | None) -> tuple[Outcome, str, str]:
    if decision.verdict is Verdict.NEEDS_APPROVAL and grant is None:
        return Outcome.DENIED, "approval_not_answered", "the approval was never answered in time: nothing ran"
    return Outcome.FAILED, "not_executed", "the request outlived its deadlines before it could run: nothing ran"
