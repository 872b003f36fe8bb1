"""The reconciler: asks an ``uncertain`` call's reconcile operation what became of it, and says so.

One replica per deployment consumes the receipts (``catalog.RECONCILER_CONSUMER``, while it holds
``Leases.RECONCILER``). Every receipt that is not ``uncertain`` is acknowledged; so is one whose
operation (in the descriptor version the receipt names) declares no ``reconcile``. For the others
it calls the reconcile operation (a ``READ_ONLY`` operation of the same tool,
``OperationSpec.reconcile``) through the tool host with the call's own arguments, read from its
decision, and expects a :class:`~effectgate.contracts.tools.hosting.ReconcileAnswer`:

- ``ran`` / ``not_run``: published as a signed :class:`UncertainResolved`, ``resolved_by="reconciler"``
  (its note clipped, an effect id over ``domain.MAX_EFFECT_ID_CHARS`` dropped: it fits one message);
- ``unknown``, a refusal, a failure, a timeout or an answer that is no ``ReconcileAnswer``: one
  attempt; the receipt is delivered again after :meth:`Backoff.delay_s` (each delivery is an
  attempt, ``Delivery.num_delivered``);
- attempts exhausted or the receipt older than ``Backoff.max_age_s``: ``unknown``, left to the operator.

Each receipt gets one reconciler resolution, whose id (:func:`reconciler_id`) is the same for every
delivery, so a redelivery after the publish is deduplicated by ``Nats-Msg-Id``; a receipt whose
call is already resolved is acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.contracts.bus.catalog import names_its_request
from effectgate.contracts.events import DecisionMade, ReceiptIssued, Resolution, decode_untrusted
from effectgate.contracts.integrity.signing import signed_by
from effectgate.contracts.tools.descriptors import DescriptorSource, ToolDescriptor
from effectgate.contracts.tools.hosting import CallContext, ReconcileAnswer
from effectgate.contracts.vocabulary import Outcome
from effectgate.executor.domain import clipped, target_id
from effectgate.executor.effects.running import ToolHost
from effectgate.executor.effects.unsealing import Unsealer
from effectgate.executor.errors import ExecutorError
from effectgate.executor.ports import Outlet
from effectgate.executor.reconciling.resolutions import SETTLED, reconciler_id, resolved_event, settled
from effectgate.shared.consumer.consumers import Delivery
from effectgate.shared.consumer.worker import Later, Settle, Settlement

__all__ = ["Backoff", "Reconciler"]

log = logging.getLogger("effectgate.executor")
_receipt = msgspec.json.Decoder(ReceiptIssued)


@dataclass(frozen=True)
class Backoff:
    """How often and how long an ``uncertain`` call is reconciled (``ExecutorSettings.reconcile_*``).

    Attributes:
        first_s: wait before the second attempt, seconds; doubled for each later one.
        max_s: longest wait between two attempts, seconds.
        attempts: reconcile calls at most.
        max_age_s: seconds after the receipt past which the call is resolved ``unknown``.
    """

    first_s: float = 1.0
    max_s: float = 60.0
    attempts: int = 12
    max_age_s: float = 86_400.0

    def delay_s(self, attempt: int) -> float:
        """Seconds to wait after attempt ``attempt`` (1 for the first)."""
        return float(min(self.first_s * 2 ** min(attempt - 1, 32), self.max_s))


@dataclass(frozen=True)
class _Call:
    """What the reconcile operation is asked: the tool, its operation and the call's decision."""

    descriptor: ToolDescriptor
    operation: str
    decision: DecisionMade


@dataclass
class Reconciler:
    """Resolves ``uncertain`` calls through their reconcile operations (module doc).

    Args:
        tools: the executor's tool host.
        bus: the stream (decisions, resolutions).
        descriptors: the published descriptors.
        receipts_key: the executor's public key: only its receipts are reconciled.
        clock: current UTC time.
        unsealer: opens the call's sealed secret arguments, as for its run.
        backoff: the attempts' bounds.
    """

    tools: ToolHost
    bus: Outlet
    descriptors: DescriptorSource
    receipts_key: Ed25519PublicKey
    clock: Callable[[], datetime]
    unsealer: Unsealer
    backoff: Backoff

    async def handle(self, delivery: Delivery) -> Settlement:
        """Settle one delivered receipt: acknowledged, or delivered again later for another attempt."""
        receipt = self._verified(delivery)
        if receipt is None or receipt.outcome is not Outcome.UNCERTAIN:
            return Settle.ACK
        call = await self._call_of(receipt)
        if call is None:
            return Settle.ACK  # no reconcile operation declared: left to the operator
        if await self._resolved(receipt):
            return Settle.ACK
        return await self._attempt(receipt, call, delivery.num_delivered)

    def _verified(self, delivery: Delivery) -> ReceiptIssued | None:
        """The delivered receipt when the executor signed it for the request its subject names."""
        try:
            receipt = decode_untrusted(_receipt, delivery.data)
        except msgspec.DecodeError:
            return None
        if not (names_its_request(delivery.subject, receipt) and signed_by(delivery.data, self.receipts_key)):
            return None  # a forgery: the audit's sentinel reports it
        return receipt

    async def _call_of(self, receipt: ReceiptIssued) -> _Call | None:
        """The reconcile operation of ``receipt``'s call and its decision, or ``None`` when it declares none."""
        if receipt.tool is None or receipt.version is None or receipt.operation is None:
            return None
        descriptor = await self.descriptors.get(receipt.tool, receipt.version)
        spec = descriptor.operations.get(receipt.operation) if descriptor is not None else None
        if descriptor is None or spec is None or spec.reconcile is None:
            return None
        decision = await self.bus.decision(receipt.principal, receipt.request_id)
        if decision is None or decision.request is None:
            return None
        return _Call(descriptor, spec.reconcile, decision)

    async def _resolved(self, receipt: ReceiptIssued) -> bool:
        """Whether the call already has the reconciler's resolution or a settling one."""
        found = await self.bus.resolutions(receipt.principal, receipt.request_id)
        return settled(found) is not None or any(r.event_id == reconciler_id(receipt) for r in found)

    async def _attempt(self, receipt: ReceiptIssued, call: _Call, attempt: int) -> Settlement:
        answer = await self._ask(call)
        if isinstance(answer, ReconcileAnswer) and answer.resolution in SETTLED:
            await self._publish(receipt, answer.resolution, clipped(answer.note), attempt, target_id(answer.effect_id))
            return Settle.ACK
        said = (answer.note or "the target does not know yet") if isinstance(answer, ReconcileAnswer) else answer
        why = clipped(said)
        old = self.clock() - receipt.occurred_at > timedelta(seconds=self.backoff.max_age_s)
        if attempt >= self.backoff.attempts or old:
            note = f"not reconciled after {attempt} attempt(s): {why}; left to the operator"
            await self._publish(receipt, "unknown", note, attempt)
            return Settle.ACK
        log.info("%s: reconcile attempt %s: %s", receipt.request_id, attempt, why)
        return Later(self.backoff.delay_s(attempt))

    async def _ask(self, call: _Call) -> ReconcileAnswer | str:
        """The reconcile operation's answer, or why there is none (a refusal, a fault, a timeout, a bad answer)."""
        bound, timeout_s = call.decision.request, call.descriptor.timeout_s
        assert bound is not None
        try:
            arguments = self.unsealer.open(call.descriptor, bound.operation, bound.arguments).arguments
            context = self._context(call.decision, timeout_s)
            ask = self.tools.call(call.descriptor, call.operation, arguments, context=context)
            return msgspec.convert(await asyncio.wait_for(ask, timeout_s), ReconcileAnswer)
        except ExecutorError as error:
            return f"{call.operation}: {error.reason_code}: {error.reason}"
        except TimeoutError:
            return f"{call.operation}: no answer in {timeout_s:g}s"
        except msgspec.ValidationError as error:
            return f"{call.operation}: not a reconcile answer: {error}"
        except Exception as error:  # an adapter's own fault is one failed attempt, never a crash
            log.exception("%s: the reconcile call failed unexpectedly", call.decision.request_id)
            return f"{call.operation}: {type(error).__name__}"

    def _context(self, decision: DecisionMade, timeout_s: float) -> CallContext:
        return CallContext(
            principal=decision.principal,
            request_id=decision.request_id,
            idempotency_key=decision.idempotency_key or "",
            deadline=self.clock() + timedelta(seconds=timeout_s),
            policy_version=decision.policy_version,
        )

    async def _publish(
        self, receipt: ReceiptIssued, resolution: Resolution, note: str, attempts: int, effect_id: Any = None
    ) -> None:
        event = resolved_event(
            receipt,
            resolution,
            self.clock(),
            reconciler_id(receipt),
            resolved_by="reconciler",
            note=note,
            effect_id=effect_id,
            attempts=attempts,
        )
        await self.bus.publish_resolution(event)
        principal, request_id = receipt.principal, receipt.request_id
        log.warning("%s/%s: uncertain call resolved %s by the reconciler", principal, request_id, resolution)
