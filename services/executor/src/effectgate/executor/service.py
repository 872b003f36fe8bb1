"""The executor workflow: verify, claim the idempotency key, run at most once, issue the receipt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from effectgate.contracts.events import (
    ApprovalGranted,
    ApprovalRejected,
    DecisionMade,
    ReceiptIssued,
    UncertainResolved,
    request_hash,
)
from effectgate.contracts.replays import ended_as
from effectgate.contracts.tools.descriptors import DescriptorSource, ToolDescriptor, descriptor_digest
from effectgate.contracts.vocabulary import Outcome, SideEffectClass, Verdict
from effectgate.executor.domain import (
    Claim,
    Step,
    effect_id,
    never_ran,
    next_step,
    receipt,
    replay_receipt,
    side_effect,
    stored_receipt,
)
from effectgate.executor.effects.claims import DurableClaims
from effectgate.executor.effects.key_claims import KeyClaims
from effectgate.executor.effects.permission import Permission, RecheckUnavailable
from effectgate.executor.effects.running import Runner
from effectgate.executor.effects.timing import Timing
from effectgate.executor.ports import IdempotencyStore, Outlet
from effectgate.executor.receipts.issuing import Issuer
from effectgate.executor.receipts.waiting_on import waiting_on
from effectgate.executor.reconciling.resolutions import holding
from effectgate.executor.verification import Keys, Verifier
from effectgate.shared.consumer.acks import Later, Settle, Settlement
from effectgate.shared.runtime.metrics import record_stage
from effectgate.shared.runtime.reporting import SecurityReporter

__all__ = ["DescriptorSource", "Executor", "Timing"]


@dataclass
class Executor:
    """The executor workflow; every collaborator is injected.

    ``bus`` is an :class:`~effectgate.executor.ports.Outlet`: a receipt is sealed (scrubbed of
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
    _key_claims: KeyClaims = field(init=False)

    def __post_init__(self) -> None:
        self._key_claims = KeyClaims(self.store, self.bus, self.clock, self.instance, self.timing)

    @property
    def _verifier(self) -> Verifier:
        return Verifier(self.keys, self.bus, self.reporter)

    @property
    def _receipts(self) -> Issuer:
        return Issuer(self.store, self.bus, self.clock, self.timing.idempotency_ttl_s)

    async def on_decision(self, decision: DecisionMade) -> Settlement:
        """Handle a decision: approval → wait; forged → term; deny/refuse → receipt; execute → run.

        A ``needs_approval`` decision is passed over unverified: nothing acts on it here (a
        grant is what runs it, and the decision is read back and verified with the grant).
        """
        if decision.verdict is Verdict.NEEDS_APPROVAL:
            return Settle.ACK
        if not self._verifier.decision(decision):
            return Settle.TERM
        if decision.verdict is Verdict.EXECUTE:
            return await self.execute(decision)
        outcome = Outcome.REFUSED if decision.verdict is Verdict.REFUSE else Outcome.DENIED
        return await self._receipts.issue(
            decision, outcome, decision.reason_code, decision.reason, decision.retry_after_s
        )

    async def on_granted(self, grant: ApprovalGranted) -> Settlement:
        """Run a granted call after checking the grant binds exactly the decided request.

        Its receipt names the grant's approval (:mod:`effectgate.executor.receipts.waiting_on`).
        """
        with waiting_on(grant.principal, grant.request_id, grant.approval_id):
            return await self._on_granted(grant)

    async def _on_granted(self, grant: ApprovalGranted) -> Settlement:
        decision = await self.approved_decision(grant)
        if decision is None or decision.request is None or grant.request_hash != request_hash(decision.request):
            if decision is not None:
                self._verifier.forged_approval(grant, "the grant binds other content than the request's decision")
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
            return await self._receipts.issue(decision, Outcome.DENIED, event.reason_code, event.reason)

    async def approved_decision(self, event: ApprovalGranted | ApprovalRejected) -> DecisionMade | None:
        """The signed ``needs_approval`` decision a signed approval event refers to, else ``None``."""
        return await self._verifier.approved_decision(event)

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
            return await self._receipts.issue(decision, *never_ran(decision, grant))
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
            return await self._receipts.issue(decision, Outcome.REFUSED, "hash_mismatch", reason)
        descriptor = await self.descriptors.get(bound.tool, bound.version)
        if descriptor is None or descriptor_digest(descriptor) != bound.descriptor_digest:
            reason = f"{bound.tool}@{bound.version} is not the descriptor that was decided"
            return await self._receipts.issue(decision, Outcome.REFUSED, "descriptor_mismatch", reason)
        claim = await self._key_claims.claim(decision)
        step = next_step(
            claim, decision.request_id, side_effect(decision), await self._key_claims.abandoned(claim, decision)
        )
        if step is Step.WAIT:
            return Later(self._key_claims.wait_s(claim, decision))
        if step in (Step.RUN, Step.TAKE_OVER):
            return await self._start(step, claim, decision, descriptor, grant, final)
        return await self._follow(step, claim, decision)

    async def _start(
        self,
        step: Step,
        claim: Claim,
        decision: DecisionMade,
        descriptor: ToolDescriptor,
        grant: ApprovalGranted | None,
        final: bool,
    ) -> Settlement:
        """Check and run a call whose key this handler holds now; it counts as running here meanwhile."""
        with self._key_claims.holding(decision):
            return await self._checked_start(step, claim, decision, descriptor, grant, final)

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
            return await self._not_started(decision, *never_ran(decision, grant))
        try:
            stop = await self.permission.check(decision, grant)
        except RecheckUnavailable:
            await self._key_claims.release(decision)
            return Settle.RETRY
        if stop is not None:
            return await self._not_started(decision, *stop)
        if step is Step.TAKE_OVER:
            await self.store.take_over(
                decision.principal, decision.idempotency_key or "", claim.owner_request_id or "", decision.request_id
            )
        if side_effect(decision) is not SideEffectClass.READ_ONLY:
            if not self.lease():  # this instance may be taken for dead: start nothing, try again later
                await self._key_claims.release(decision)
                return Settle.RETRY
            if await self.bus.receipt(decision.principal, decision.request_id) is not None:
                await self._key_claims.release(decision)
                return Settle.ACK
            if (earlier := await self._claim_durably(decision)) is not None:
                return await self._follow(*earlier, decision)
        return await self._run(decision, descriptor, grant)

    async def _claim_durably(self, decision: DecisionMade) -> tuple[Step, Claim] | None:
        """Record the write's claim in the stream; if that fails, nothing ran: free the key and retry."""
        try:
            return await self.claims.record(decision)
        except Exception:
            await self._key_claims.release(decision)
            raise

    async def _run(
        self, decision: DecisionMade, descriptor: ToolDescriptor, grant: ApprovalGranted | None
    ) -> Settlement:
        issued = await self.runner.run(decision, descriptor, grant)
        return await self._receipts.complete(decision, issued)

    async def _follow(self, step: Step, claim: Claim, decision: DecisionMade) -> Settlement:
        if step is Step.ENDED:
            return Settle.ACK
        if step in (Step.REPUBLISH, Step.REPLAY):
            stored = stored_receipt(claim)
            if step is Step.REPUBLISH:
                return await self._receipts.send(stored)
            resolved = await self._resolution_of(stored)
            return await self._receipts.send(replay_receipt(decision, self.clock(), stored, resolved))
        if step is Step.REFUSE_REUSED:
            reason = (
                "idempotency key was used with another request (other arguments, or another tool version or descriptor)"
            )
            return await self._receipts.issue(decision, Outcome.REFUSED, "idempotency_key_reused", reason)
        if step is Step.REFUSE_IN_USE:
            reason = f"request {claim.owner_request_id} holds this key and its outcome is unknown"
            return await self._receipts.issue(decision, Outcome.REFUSED, "idempotency_key_in_use", reason)
        return await self._receipts.complete(decision, self._interrupted(decision))

    async def _resolution_of(self, stored: ReceiptIssued) -> UncertainResolved | None:
        """The resolution that holds for a stored ``uncertain`` call (:mod:`~effectgate.executor.reconciling`)."""
        if ended_as(stored) is not Outcome.UNCERTAIN:
            return None
        origin = stored.replay_of if stored.outcome is Outcome.REPLAYED and stored.replay_of else stored.request_id
        return holding(await self.bus.resolutions(stored.principal, origin))

    def _interrupted(self, decision: DecisionMade) -> ReceiptIssued:
        reason = "the run of this write was interrupted; whether its effect happened is unknown — reconcile it"
        effect = effect_id(decision.principal, decision.idempotency_key or "")
        return receipt(decision, self.clock(), Outcome.UNCERTAIN, "execution_interrupted", reason, effect_id=effect)

    async def _not_started(
        self, decision: DecisionMade, outcome: Outcome, code: str, reason: str, retry_after_s: float | None = None
    ) -> Settlement:
        await self._key_claims.release(decision)
        return await self._receipts.issue(decision, outcome, code, reason, retry_after_s)
