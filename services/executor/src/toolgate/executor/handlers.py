"""The executor's broker edge: decisions, approvals and the backstop in; receipts out.

Bystanders cost next to nothing. The rule: a message is decoded and verified only where
something here acts on it. The approvals consumer acts on grants and rejections only: an
event on a ``requested`` or ``voted`` subject grants nothing, so it is acknowledged
undecoded (the audit's sentinel verifies every signed subject and reports a forgery
there). The backstop consumer holds every request: one younger than its first deadline
is only scheduled again, from the stream's timestamp, its body not decoded. One
request/reply subject, ``tg.executor.contents``, answers what a call's file references name
(:class:`~toolgate.executor.binding.ContentReporter`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from faststream.nats import NatsMessage, NatsRouter

from toolgate.contracts import catalog
from toolgate.contracts.catalog import Rpc, Subjects
from toolgate.contracts.events import (
    ApprovalGranted,
    ApprovalRejected,
    ApprovalRequested,
    ApprovalVoted,
    DecisionMade,
    decode_untrusted,
    request_hash,
    request_identity,
)
from toolgate.contracts.security import SecurityKind
from toolgate.contracts.vocabulary import Verdict
from toolgate.executor.backstop import Backstop
from toolgate.executor.binding import ContentReporter
from toolgate.executor.errors import IdempotencyStoreUnavailable, IndexLost
from toolgate.executor.forgery import about_subject, report_message
from toolgate.executor.service import Executor
from toolgate.executor.upkeep import Upkeep
from toolgate.shared.failpoints import failpoint
from toolgate.shared.handling import Consumer, Delivery, Later, Settle, Settlement
from toolgate.shared.service import rpc

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


def build_router(runtime: Callable[[], ExecutorRuntime]) -> NatsRouter:
    """Route ``tg.executor.contents`` to the :class:`ContentReporter` (only the approvals service may ask)."""
    router = NatsRouter()

    @rpc(router, Rpc.EXECUTOR_CONTENTS, "executor")
    async def on_contents(msg: NatsMessage) -> bytes:
        return msgspec.json.encode(await runtime().contents.answer_bytes(msg.raw_message.data or b""))

    return router


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
    """The executor's three durable consumers, each with its give-up."""

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
        rt = runtime()
        if (young := rt.backstop.not_yet(delivery.stored_at)) is not None:
            return young  # nothing read, the body not even decoded
        principal = delivery.subject.split(".", 2)[2]
        request_id = request_identity(delivery.data, delivery.headers.get("Nats-Msg-Id"), delivery.stream_seq)
        return await _guarded(rt, rt.backstop.check(principal, request_id, delivery.stored_at))

    return [
        Consumer(catalog.EXECUTOR_DECISIONS, on_decision, _give_up_decision(runtime)),
        Consumer(catalog.EXECUTOR_APPROVALS, on_approval, _give_up_approval(runtime)),
        Consumer(catalog.BACKSTOP_CONSUMER, on_request, give_up=None, max_workers=4, handler_timeout_s=30.0),
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
