"""The executor's broker edge: decisions, approvals and the backstop in; receipts out; agents' own records read back.

Bystanders cost next to nothing. The rule: a message is decoded and verified only where
something here acts on it. The approvals consumer acts on grants and rejections only: an event
on a ``requested`` or ``voted`` subject grants nothing, so it is acknowledged undecoded (the
audit's sentinel verifies every signed subject and reports a forgery there).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import nats.errors
from faststream.nats import NatsMessage, NatsRouter
from nats.js import JetStreamContext

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects, principal_of_request, token_of
from effectgate.contracts.errors import IndexLost
from effectgate.contracts.events import (
    ApprovalGranted,
    ApprovalRejected,
    ApprovalRequested,
    ApprovalVoted,
    DecisionMade,
    decode_untrusted,
    request_hash,
    request_identity,
)
from effectgate.contracts.failpoints import failpoint
from effectgate.contracts.rpc.uncertain import ResolveAnswer, UncertainPage
from effectgate.contracts.security import SecurityKind
from effectgate.contracts.vocabulary import Verdict
from effectgate.executor.background.backstop import Backstop
from effectgate.executor.background.upkeep import Upkeep
from effectgate.executor.effects.binding import ContentReporter
from effectgate.executor.errors import IdempotencyStoreUnavailable
from effectgate.executor.forgery import about_subject, report_message
from effectgate.executor.reconciling.operator import UncertainDesk
from effectgate.executor.reconciling.reconciler import Reconciler
from effectgate.executor.service import Executor
from effectgate.shared.consumer.consumers import Consumer, Delivery
from effectgate.shared.consumer.worker import Later, Settle, Settlement
from effectgate.shared.runtime.assembly import Reply, max_payload_of, rpc
from effectgate.shared.stores.records import record_answer

__all__ = ["ExecutorRuntime", "build_router", "consumers"]

_decision = msgspec.json.Decoder(DecisionMade)
_approval = msgspec.json.Decoder(ApprovalGranted | ApprovalRejected | ApprovalRequested | ApprovalVoted)
_INFORMATIVE = (ApprovalRequested, ApprovalVoted)
"""Approval events that grant nothing: acknowledged and otherwise ignored."""
_ACTED_ON = tuple(subject.removesuffix("*.*") for subject in (Subjects.APPROVALS_GRANTED, Subjects.APPROVALS_REJECTED))
"""Prefixes (``tg.approval.granted.``, ``tg.approval.rejected.``) of the only approval subjects the executor acts on."""

INDEX_WAIT_S = 2.0
"""Pause before retrying a message while the index is rebuilt, seconds."""


@dataclass
class ExecutorRuntime:
    """What the handlers need once the service has started."""

    executor: Executor
    backstop: Backstop
    upkeep: Upkeep
    contents: ContentReporter
    js: JetStreamContext
    """Where agents' records are read back for them (``tg.records.get.<principal>``)."""
    reconciler: Reconciler
    uncertain: UncertainDesk
    """The operator's ``tg.executor.uncertain.list`` and ``.resolve``."""
    reconciling: Callable[[], bool]
    """Whether this replica holds ``Leases.RECONCILER`` now (only then it consumes the receipts)."""


def build_router(runtime: Callable[[], ExecutorRuntime]) -> NatsRouter:
    """Route the executor's requests: what a call's file references name, and agents' own records.

    ``tg.executor.contents`` goes to the :class:`ContentReporter` (only the approvals service may ask);
    ``tg.records.get.<principal>`` to :func:`record_answer` (each agent reads its own records only);
    ``tg.executor.uncertain.list`` and ``.resolve`` to the :class:`UncertainDesk` (only the operator may ask).
    """
    router = NatsRouter()

    @rpc(router, Rpc.EXECUTOR_CONTENTS, "executor")
    async def on_contents(msg: NatsMessage) -> bytes:
        return msgspec.json.encode(await runtime().contents.answer_bytes(msg.raw_message.data or b""))

    @rpc(router, Rpc.RECORDS_GET, "executor")
    async def on_record(msg: NatsMessage) -> Reply:
        principal = token_of(Rpc.RECORDS_GET, msg.raw_message.subject) or ""
        return await record_answer(runtime().js, principal, msg.raw_message.data or b"", max_payload_of(msg))

    @rpc(router, Rpc.UNCERTAIN_LIST, "executor")
    async def on_uncertain_list(msg: NatsMessage) -> bytes:
        try:
            page = await runtime().uncertain.list_page(msg.raw_message.data or b"", max_payload_of(msg))
        except (nats.errors.Error, OSError) as error:
            page = UncertainPage(ok=False, reason_code="stream_unavailable", reason=type(error).__name__)
        return msgspec.json.encode(page)

    @rpc(router, Rpc.UNCERTAIN_RESOLVE, "executor")
    async def on_uncertain_resolve(msg: NatsMessage) -> bytes:
        try:
            answer = await runtime().uncertain.resolve(msg.raw_message.data or b"")
        except (nats.errors.Error, OSError) as error:
            answer = ResolveAnswer(ok=False, reason_code="stream_unavailable", reason=type(error).__name__)
        return msgspec.json.encode(answer)

    return router


async def _backstop(rt: ExecutorRuntime, delivery: Delivery) -> Settlement:
    """Hold one request until it has a receipt; end it once it outlived every deadline."""
    if (young := rt.backstop.not_yet(delivery.stored_at)) is not None:
        return young  # nothing read, the body not even decoded
    principal = principal_of_request(delivery.subject)
    if principal is None:
        return Settle.TERM  # no request of anyone's: nothing to end (the consumer's filter admits none)
    request_id = request_identity(delivery.data, delivery.headers.get("Nats-Msg-Id"), delivery.stream_seq)
    return await _guarded(rt, rt.backstop.check(principal, request_id, delivery.stored_at))


async def _guarded(rt: ExecutorRuntime, work: Awaitable[Settlement]) -> Settlement:
    try:
        return await work
    except IndexLost:
        rt.upkeep.index_lost()
        return Later(INDEX_WAIT_S)
    except IdempotencyStoreUnavailable:
        return Settle.RETRY


def _decode(decoder: msgspec.json.Decoder[Any], delivery: Delivery) -> Any:
    try:
        return decode_untrusted(decoder, delivery.data)
    except msgspec.DecodeError:
        return None


def consumers(runtime: Callable[[], ExecutorRuntime]) -> list[Consumer]:
    """The executor's durable consumers, each with its give-up (the reconciler's never gives up)."""

    async def on_decision(delivery: Delivery) -> Settlement:
        rt, decision = runtime(), _decode(_decision, delivery)
        if decision is None or not about_subject(delivery.subject, decision):
            report_message(
                rt.executor.reporter, SecurityKind.DECISION_FORGED, delivery.subject, delivery.data, decision
            )
            return Settle.TERM
        await failpoint("executor.decision", decision.request_id)
        return await _guarded(rt, rt.executor.on_decision(decision))

    async def on_approval(delivery: Delivery) -> Settlement:
        if not delivery.subject.startswith(_ACTED_ON):
            return Settle.ACK  # requested, voted: grants nothing; left undecoded (module doc)
        rt, event = runtime(), _decode(_approval, delivery)
        if event is None or not isinstance(event, _INFORMATIVE) and not about_subject(delivery.subject, event):
            report_message(rt.executor.reporter, SecurityKind.APPROVAL_FORGED, delivery.subject, delivery.data, event)
            return Settle.TERM
        if isinstance(event, ApprovalGranted):
            await failpoint("executor.grant", event.request_id)
            return await _guarded(rt, rt.executor.on_granted(event))
        if isinstance(event, ApprovalRejected):
            return await _guarded(rt, rt.executor.on_rejected(event))
        return Settle.ACK  # an ApprovalRequested or ApprovalVoted: it grants nothing

    async def on_request(delivery: Delivery) -> Settlement:
        return await _backstop(runtime(), delivery)

    fair = catalog.principal_of_event
    return [
        Consumer(catalog.EXECUTOR_DECISIONS, on_decision, _give_up_decision(runtime), fair_by=fair),
        Consumer(catalog.EXECUTOR_APPROVALS, on_approval, _give_up_approval(runtime), fair_by=fair),
        Consumer(catalog.BACKSTOP_CONSUMER, on_request, give_up=None, max_workers=4, handler_timeout_s=30.0),
        Consumer(
            catalog.RECONCILER_CONSUMER,
            lambda delivery: runtime().reconciler.handle(delivery),
            give_up=None,
            max_workers=4,  # more than one: a later attempt is a nak with its delay, not a wait in place
            active=lambda: runtime().reconciling(),
        ),
    ]


def _give_up_decision(runtime: Callable[[], ExecutorRuntime]) -> Callable[[Delivery], Awaitable[None]]:
    async def give_up(delivery: Delivery) -> None:
        executor, decision = runtime().executor, _decode(_decision, delivery)
        if decision is None or decision.verdict is Verdict.NEEDS_APPROVAL:
            return
        await (executor.end(decision) if decision.verdict is Verdict.EXECUTE else executor.on_decision(decision))

    return give_up


def _give_up_approval(runtime: Callable[[], ExecutorRuntime]) -> Callable[[Delivery], Awaitable[None]]:
    async def give_up(delivery: Delivery) -> None:
        executor, event = runtime().executor, _decode(_approval, delivery)
        if isinstance(event, ApprovalRejected):
            await executor.on_rejected(event)
        if not isinstance(event, ApprovalGranted):
            return
        decision = await executor.approved_decision(event)
        if decision is not None and decision.request and event.request_hash == request_hash(decision.request):
            await executor.end(decision, event)

    return give_up
