"""The executor workflow: verify, claim the idempotency key, run once, issue the receipt.

A call runs only on a policy-signed ``execute`` decision, or on an approvals-signed
grant whose request hash equals the hash recomputed from the decision's request —
the bytes that will run (guarantees 4 and 6, docs/architecture.md). The idempotency record is completed
before the receipt is published, so a crash between the two republishes the stored
receipt and never re-runs the tool.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from toolgate.executor.domain import Step, effect_id, next_step, receipt, replay_receipt, scrub
from toolgate.executor.errors import ExecutorError, StoreUnavailable, ToolRefused, ToolTimeout
from toolgate.executor.ports import Claim, IdempotencyStore
from toolgate.shared.catalog import Subjects
from toolgate.shared.descriptors import ToolDescriptor, descriptor_digest
from toolgate.shared.events import ApprovalGranted, ApprovalRejected, DecisionMade, ReceiptIssued, request_hash
from toolgate.shared.schemas import first_error
from toolgate.shared.settle import Settle
from toolgate.shared.signing import verify_event
from toolgate.shared.vocabulary import Outcome, SideEffectClass, Verdict

__all__ = ["DescriptorSource", "Executor", "ToolHost"]

_receipt_decoder = msgspec.json.Decoder(ReceiptIssued)


class ToolHost(Protocol):
    """Runs one operation of a tool (file system, MCP server, …)."""

    async def call(self, descriptor: ToolDescriptor, operation: str, arguments: dict[str, Any]) -> Any:
        """Return the operation's result; raise :class:`ExecutorError` subclasses on failure."""
        ...


class DescriptorSource(Protocol):
    """Reads tool descriptors (the registry's KV bucket)."""

    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        """Return the descriptor or ``None``."""
        ...


@dataclass
class Executor:
    """The executor workflow; every collaborator is injected."""

    store: IdempotencyStore
    descriptors: DescriptorSource
    tools: ToolHost
    policy_key: Ed25519PublicKey
    approvals_key: Ed25519PublicKey
    publish: Callable[[str, ReceiptIssued], Awaitable[object]]
    fetch_decision: Callable[[str, str], Awaitable[DecisionMade | None]]
    fetch_receipt: Callable[[str, str], Awaitable[ReceiptIssued | None]]
    clock: Callable[[], datetime]
    idempotency_ttl_s: float = 86_400.0
    stale_grace_s: float = 30.0
    decision_max_age_s: float = 3_600.0
    last_delivery: int = 19

    async def on_decision(self, decision: DecisionMade, delivery: int = 1) -> Settle:
        """Handle a decision: forged → term; deny/refuse → receipt; execute → run; approval → wait."""
        if not verify_event(decision, self.policy_key):
            return Settle.TERM
        if decision.verdict is Verdict.NEEDS_APPROVAL:
            return Settle.ACK
        if decision.verdict is Verdict.EXECUTE:
            return await self.execute(decision, delivery)
        outcome = Outcome.REFUSED if decision.verdict is Verdict.REFUSE else Outcome.DENIED
        return await self._issue(decision, outcome, decision.reason_code, decision.reason)

    async def on_rejected(self, event: ApprovalRejected) -> Settle:
        """End a request whose approval was rejected or expired."""
        decision = await self._approved_decision(event)
        if decision is None:
            return Settle.TERM
        return await self._issue(decision, Outcome.DENIED, event.reason_code, event.reason)

    async def on_granted(self, event: ApprovalGranted, delivery: int = 1) -> Settle:
        """Run a granted call after checking the grant binds exactly the decided request."""
        decision = await self._approved_decision(event)
        if decision is None or decision.request is None or event.request_hash != request_hash(decision.request):
            return Settle.TERM
        if await self.fetch_receipt(decision.principal, decision.request_id) is not None:
            return Settle.TERM  # the request already ended (e.g. its approval could not be opened): run nothing
        return await self.execute(decision, delivery, approval_expires_at=event.expires_at)

    async def _approved_decision(self, event: ApprovalGranted | ApprovalRejected) -> DecisionMade | None:
        if not verify_event(event, self.approvals_key):
            return None
        decision = await self.fetch_decision(event.principal, event.request_id)
        ok = decision is not None and verify_event(decision, self.policy_key)
        return decision if ok and decision and decision.verdict is Verdict.NEEDS_APPROVAL else None

    async def execute(
        self, decision: DecisionMade, delivery: int = 1, approval_expires_at: datetime | None = None
    ) -> Settle:
        """Run the decided call at most once per (principal, idempotency key).

        Expiry (of the approval, or of the decision itself) is checked only when the key
        is new: a redelivery after a crash mid-run must end ``uncertain``, not ``denied``.
        """
        problem = await self._unrunnable(decision)
        if problem:
            return await self._issue(decision, Outcome.REFUSED, problem[0], problem[1])
        try:
            return await self._claimed(decision, approval_expires_at)
        except StoreUnavailable as error:
            if delivery < self.last_delivery:
                return Settle.RETRY
            return await self._issue(decision, Outcome.FAILED, error.reason_code, "idempotency store unavailable")

    async def _unrunnable(self, decision: DecisionMade) -> tuple[str, str] | None:
        bound = decision.request
        if bound is None or not decision.idempotency_key or decision.request_hash != request_hash(bound):
            return ("hash_mismatch", "the decided request does not hash to the decision's request hash")
        descriptor = await self.descriptors.get(bound.tool, bound.version)
        if descriptor is None or descriptor_digest(descriptor) != bound.descriptor_digest:
            return ("descriptor_mismatch", f"{bound.tool}@{bound.version} is not the descriptor that was decided")
        return None

    async def _claimed(self, decision: DecisionMade, approval_expires_at: datetime | None) -> Settle:
        assert decision.request is not None and decision.idempotency_key and decision.request_hash
        principal, key = decision.principal, decision.idempotency_key
        claim = await self.store.claim(
            principal, key, decision.request_hash, decision.request_id, self.idempotency_ttl_s
        )
        side_effect = decision.side_effect_class or SideEffectClass.SECURITY_SENSITIVE
        stale_ms = int(((decision.timeout_s or 30.0) + self.stale_grace_s) * 1000)
        step = next_step(claim, decision.request_id, side_effect, int(time.time() * 1000), stale_ms)
        if step in (Step.RUN, Step.TAKE_OVER) and (barred := self._barred(decision, approval_expires_at)):
            return await self._complete(decision, barred)
        return await self._follow(step, claim, decision)

    def _barred(self, decision: DecisionMade, approval_expires_at: datetime | None) -> ReceiptIssued | None:
        now = self.clock()
        if decision.reason_code == "idempotent_replay":
            reason = "the key's stored receipt is gone (expired): nothing ran; retry with a new idempotency key"
            return receipt(decision, now, Outcome.REFUSED, "replay_record_missing", reason)
        if approval_expires_at is not None and approval_expires_at <= now:
            return receipt(decision, now, Outcome.DENIED, "approval_expired", "the approval expired before use")
        if (now - decision.occurred_at).total_seconds() > self.decision_max_age_s:
            reason = f"the decision is older than {self.decision_max_age_s:g}s: nothing ran"
            return receipt(decision, now, Outcome.DENIED, "decision_expired", reason)
        return None

    async def _follow(self, step: Step, claim: Claim, decision: DecisionMade) -> Settle:
        if step is Step.WAIT:
            return Settle.RETRY
        if step in (Step.REPUBLISH, Step.REPLAY):
            stored = _receipt_decoder.decode(claim.receipt or b"")
            return await self._send(
                stored if step is Step.REPUBLISH else replay_receipt(decision, self.clock(), stored)
            )
        if step is Step.REFUSE_REUSED:
            reason = "idempotency key was used with other arguments"
            return await self._issue(decision, Outcome.REFUSED, "idempotency_key_reused", reason)
        if step is Step.REFUSE_IN_USE:
            reason = f"request {claim.owner_request_id} holds this key and its outcome is unknown"
            return await self._issue(decision, Outcome.REFUSED, "idempotency_key_in_use", reason)
        if step is Step.UNCERTAIN:
            return await self._complete(decision, self._interrupted(decision))
        if step is Step.TAKE_OVER:
            key, owner = decision.idempotency_key or "", claim.owner_request_id or ""
            await self.store.take_over(decision.principal, key, owner, decision.request_id)
        return await self._complete(decision, await self._run(decision))

    def _interrupted(self, decision: DecisionMade) -> ReceiptIssued:
        reason = "the executor stopped during this write; whether its effect happened is unknown — reconcile it"
        effect = effect_id(decision.principal, decision.idempotency_key or "")
        return receipt(decision, self.clock(), Outcome.UNCERTAIN, "execution_interrupted", reason, effect_id=effect)

    async def _run(self, decision: DecisionMade) -> ReceiptIssued:
        assert decision.request is not None
        bound, started = decision.request, time.perf_counter()
        descriptor = await self.descriptors.get(bound.tool, bound.version)
        assert descriptor is not None
        effect = effect_id(decision.principal, decision.idempotency_key or "")
        spec = descriptor.operations[bound.operation]
        try:
            result = await asyncio.wait_for(
                self.tools.call(descriptor, bound.operation, bound.arguments), descriptor.timeout_s
            )
        except (TimeoutError, ToolTimeout):
            return self._unknown(decision, spec.side_effect_class, "timeout", f"no answer in {descriptor.timeout_s}s")
        except ExecutorError as error:
            outcome = Outcome.REFUSED if isinstance(error, ToolRefused) else Outcome.FAILED
            return receipt(decision, self.clock(), outcome, error.reason_code, error.reason, effect_id=effect)
        elapsed_ms = (time.perf_counter() - started) * 1000
        if problem := first_error(spec.output_schema, result):
            return self._unknown(decision, spec.side_effect_class, "output_invalid", f"output invalid at {problem}")
        return receipt(
            decision,
            self.clock(),
            Outcome.SUCCEEDED,
            "ok",
            "the tool ran",
            result=scrub(result),
            effect_id=effect,
            duration_ms=round(elapsed_ms, 3),
        )

    def _unknown(self, decision: DecisionMade, side_effect: SideEffectClass, code: str, reason: str) -> ReceiptIssued:
        read_only = side_effect is SideEffectClass.READ_ONLY
        outcome = Outcome.FAILED if read_only else Outcome.UNCERTAIN
        suffix = "" if read_only else "; whether the write happened is unknown — reconcile it"
        return receipt(
            decision,
            self.clock(),
            outcome,
            code,
            reason + suffix,
            effect_id=effect_id(decision.principal, decision.idempotency_key or ""),
        )

    async def _complete(self, decision: DecisionMade, issued: ReceiptIssued) -> Settle:
        key = decision.idempotency_key or ""
        data = msgspec.json.encode(issued)
        await self.store.complete(decision.principal, key, decision.request_id, data, self.idempotency_ttl_s)
        return await self._send(issued)

    async def _issue(self, decision: DecisionMade, outcome: Outcome, code: str, reason: str) -> Settle:
        return await self._send(receipt(decision, self.clock(), outcome, code, reason))

    async def _send(self, issued: ReceiptIssued) -> Settle:
        await self.publish(Subjects.receipt(issued.principal, issued.request_id), issued)
        return Settle.ACK
