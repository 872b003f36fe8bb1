"""The policy service's broker edge: request in, signed decision out; re-checks, listings, readiness, publications.

``tg.policy.publish`` (operators only, by NATS permissions): a new policy text, validated
and put in force by :mod:`toolgate.policy.publishing`.

Spend budgets (:mod:`toolgate.policy.settling`, :mod:`toolgate.policy.reconciliation`):

- durable consumer ``policy-receipts`` over ``tg.receipt.*.*``: a receipt of a call no
  budget applies to is acknowledged unverified (it can settle nothing:
  :func:`~toolgate.policy.settling.may_hold_reservation`); any other, signed by the
  executor's receipts key and naming the request its subject names, settles that request's
  reservation; anything else is terminated and reported (``receipt_forged``). While the
  ledger is rebuilt the receipt waits (``Later``); Redis unreachable: retried with
  back-off. The consumer never gives up (``max_deliver = -1``): a reservation must not
  stay held because Redis was down for a while.
- ``tg.policy.budgets`` (operators): one page of counters with their records, for
  ``toolgate budgets check``; ``tg.policy.budgets.resolve`` (operators): commit or
  release an uncertain reservation, for ``toolgate budgets resolve``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from faststream.nats import NatsMessage, NatsRouter
from nats.js import JetStreamContext

from toolgate.contracts import catalog
from toolgate.contracts.catalog import TOKEN, Rpc, Subjects
from toolgate.contracts.events import DecisionMade, ReceiptIssued, decode_untrusted, request_identity
from toolgate.contracts.listing import Readiness
from toolgate.contracts.recheck import RecheckQuery
from toolgate.contracts.security import SecurityKind
from toolgate.contracts.signing import sign_event
from toolgate.policy.adapters.asking import ask_for_approval
from toolgate.policy.adapters.stream import signed_by
from toolgate.policy.admission import Spending
from toolgate.policy.domain import Envelope, PolicyPorts, decide, fault_denial
from toolgate.policy.errors import BudgetsLost, BudgetUnavailable
from toolgate.policy.publishing import Publisher, PublishReply, policy_text, refused
from toolgate.policy.recheck import recheck
from toolgate.policy.reconciliation import MAX_PAGE, CountersQuery, CountersReply, ResolveQuery, ResolveReply
from toolgate.policy.request_line import note_decision
from toolgate.policy.settling import may_hold_reservation, resolve, settle_receipt
from toolgate.policy.tool_listing import get_for, list_page, principal_of
from toolgate.shared.bus import publish_once
from toolgate.shared.failpoints import failpoint
from toolgate.shared.handling import Consumer, Delivery, Later, Settle, Settlement
from toolgate.shared.metrics import record_stage
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.service import max_payload_of, rpc

__all__ = [
    "REBUILD_WAIT_S",
    "BudgetRuntime",
    "PolicyRuntime",
    "budget_consumers",
    "build_router",
    "consumers",
    "envelope_of",
    "route_budgets",
]

log = logging.getLogger("toolgate.policy")

_query = msgspec.json.Decoder(RecheckQuery)
_receipt = msgspec.json.Decoder(ReceiptIssued)
_counters_query = msgspec.json.Decoder(CountersQuery)
_resolve_query = msgspec.json.Decoder(ResolveQuery)

HANDLER_TIMEOUT_S = 30.0
"""A decision still being made after this long is cancelled and retried, seconds."""


@dataclass
class PolicyRuntime:
    """What the handlers need once the service has started."""

    ports: PolicyPorts
    key: Ed25519PrivateKey
    js: JetStreamContext
    publisher: Publisher
    replica: str
    max_policy_bytes: int
    reporter: SecurityReporter | None = None


def envelope_of(delivery: Delivery) -> Envelope:
    """Principal from the subject token; request id by :func:`request_identity`."""
    principal = delivery.subject.split(".", 2)[2]
    request_id = request_identity(delivery.data, delivery.headers.get("Nats-Msg-Id"), delivery.stream_seq)
    copied_from = delivery.headers.get("Nats-Stream")
    return Envelope(principal=principal, data=delivery.data, request_id=request_id, copied_from=copied_from)


async def _publish(rt: PolicyRuntime, decision: DecisionMade, data: bytes) -> None:
    signed = sign_event(decision, rt.key)
    stored = await publish_once(rt.js, Subjects.decision(signed.principal, signed.request_id), signed)
    note_decision(decision, data, stored)
    await ask_for_approval(rt.js, signed, stored, rt.key.public_key())


def consumers(runtime: Callable[[], PolicyRuntime]) -> list[Consumer]:
    """Tool requests to :func:`decide`; a request still failing on its last delivery is denied."""

    async def on_request(delivery: Delivery) -> Settlement:
        rt, envelope = runtime(), envelope_of(delivery)
        await failpoint("policy.decide", envelope.request_id)
        decision = await decide(envelope, rt.ports)
        await _publish(rt, decision, envelope.data)
        record_stage("policy", (decision.occurred_at - delivery.stored_at).total_seconds())
        return Settle.ACK

    async def give_up(delivery: Delivery) -> None:
        rt, envelope = runtime(), envelope_of(delivery)
        reason = f"no decision could be made in {delivery.num_delivered} attempts: denied (fail closed)"
        await _publish(rt, fault_denial(envelope, rt.ports.clock(), "policy_fault", reason), envelope.data)

    return [Consumer(catalog.POLICY_CONSUMER, on_request, give_up, handler_timeout_s=HANDLER_TIMEOUT_S)]


_STARTING = Readiness(ready=False, reason="the policy service is starting")


def build_router(runtime: Callable[[], PolicyRuntime], clock: Callable[[], datetime]) -> NatsRouter:
    """Answer re-checks (signed), per-caller listings and readiness.

    ``tg.policy.recheck``: a signed :class:`~toolgate.contracts.recheck.RecheckAnswer`;
    ``tg.tools.list.<p>`` / ``tg.tools.get.<p>``: a :class:`~toolgate.contracts.listing.ToolsReply`
    for principal ``<p>``; ``tg.policy.ready``: a :class:`~toolgate.contracts.listing.Readiness`
    naming the version in force and the replica that answered; ``tg.policy.publish``
    (operators only, by NATS permissions): a :class:`~toolgate.policy.publishing.PublishReply`.
    """
    router = NatsRouter()

    @rpc(router, Rpc.TOOLS_LIST, "policy")
    async def on_list(msg: NatsMessage) -> bytes:
        principal, body = principal_of(msg.raw_message.subject), msg.raw_message.data or b""
        return msgspec.json.encode(await list_page(principal, body, runtime().ports, max_payload_of(msg)))

    @rpc(router, Rpc.TOOLS_GET, "policy")
    async def on_get(msg: NatsMessage) -> bytes:
        principal, body = principal_of(msg.raw_message.subject), msg.raw_message.data or b""
        return msgspec.json.encode(await get_for(principal, body, runtime().ports))

    @rpc(router, Rpc.POLICY_READY, "policy")
    async def on_ready(msg: NatsMessage) -> bytes:
        try:
            rt = runtime()
        except RuntimeError:  # not built yet
            return msgspec.json.encode(_STARTING)
        return msgspec.json.encode(msgspec.structs.replace(rt.ports.policy.readiness(), replica=rt.replica))

    @rpc(router, Rpc.POLICY_PUBLISH, "policy")
    async def on_publish(msg: NatsMessage) -> bytes:
        try:
            rt = runtime()
        except RuntimeError:  # not built yet
            return msgspec.json.encode(refused("the policy service is starting: nothing changed"))
        data = msg.raw_message.data or b""
        text = policy_text(data, rt.max_policy_bytes)
        reply = text if isinstance(text, PublishReply) else await rt.publisher.publish(text, "cli")
        if not reply.ok and rt.reporter is not None:  # audited; only the operator's NATS user may ask
            rt.reporter.report(
                SecurityKind.POLICY_REFUSED, reason_code="policy_refused", detail=reply.reason, payload=data
            )
        return msgspec.json.encode(reply)

    @rpc(router, Rpc.POLICY_RECHECK, "policy")
    async def on_recheck(msg: NatsMessage) -> bytes:
        rt = runtime()
        try:
            query = decode_untrusted(_query, msg.raw_message.data or b"")
        except msgspec.DecodeError as error:
            return msgspec.json.encode({"error": f"not a recheck query: {error}"})
        return msgspec.json.encode(sign_event(await recheck(query, rt.ports, clock), rt.key))

    return router


REBUILD_WAIT_S = 2.0
"""How long a receipt waits while the ledger is rebuilt, seconds."""


@dataclass
class BudgetRuntime:
    """What the budget handlers need once the service has started.

    Attributes:
        spending: the budgets in force and their ledger.
        receipts_key: the executor's receipts public key (only its receipts settle).
        reporter: reports forged receipts.
    """

    spending: Spending
    receipts_key: Ed25519PublicKey
    reporter: SecurityReporter


def budget_consumers(runtime: Callable[[], BudgetRuntime]) -> list[Consumer]:
    """The receipts consumer that settles reservations."""

    async def on_receipt(delivery: Delivery) -> Settlement:
        rt = runtime()
        try:
            receipt = decode_untrusted(_receipt, delivery.data)
        except msgspec.DecodeError:
            return Settle.TERM
        if not may_hold_reservation(receipt, rt.spending.book):
            return Settle.ACK  # no budget applies: nothing to settle, nothing verified (settling.py)
        if not _verified(rt, delivery, receipt):
            return Settle.TERM
        try:
            await settle_receipt(receipt, rt.spending)
        except BudgetsLost:
            return Later(REBUILD_WAIT_S)
        except BudgetUnavailable:
            return Settle.RETRY
        return Settle.ACK

    return [Consumer(catalog.POLICY_RECEIPTS, on_receipt, handler_timeout_s=10.0)]


def _verified(rt: BudgetRuntime, delivery: Delivery, receipt: ReceiptIssued) -> bool:
    """Whether the delivered ``receipt`` names its subject's request and is executor-signed (else reported)."""
    names_its_request = delivery.subject.split(".")[-2:] == [receipt.principal, receipt.request_id]
    if names_its_request and signed_by(delivery.data, rt.receipts_key):
        return True
    rt.reporter.report(
        SecurityKind.RECEIPT_FORGED,
        principal=receipt.principal,
        request_id=receipt.request_id,
        subject=delivery.subject,
        reason_code="signature_invalid",
        detail="not an executor-signed receipt of the request its subject names: no budget settled",
        payload=delivery.data,
    )
    return False


def route_budgets(router: NatsRouter, runtime: Callable[[], BudgetRuntime]) -> None:
    """Answer ``tg.policy.budgets`` and ``tg.policy.budgets.resolve`` on ``router``."""

    @rpc(router, Rpc.POLICY_BUDGETS, "policy")
    async def on_counters(msg: NatsMessage) -> bytes:
        return msgspec.json.encode(await _counters(runtime, msg.raw_message.data or b""))

    @rpc(router, Rpc.POLICY_BUDGETS_RESOLVE, "policy")
    async def on_resolve(msg: NatsMessage) -> bytes:
        return msgspec.json.encode(await _resolve(runtime, msg.raw_message.data or b""))


async def _counters(runtime: Callable[[], BudgetRuntime], body: bytes) -> CountersReply:
    try:
        query = decode_untrusted(_counters_query, body)
        counters, cursor = await runtime().spending.ledger.counters(query.cursor, min(max(query.count, 1), MAX_PAGE))
    except msgspec.DecodeError as error:
        return CountersReply(ok=False, reason=f"not a counters query: {error}")
    except (BudgetUnavailable, RuntimeError) as error:
        return CountersReply(ok=False, reason=getattr(error, "reason", None) or "the policy service is starting")
    return CountersReply(ok=True, counters=counters, cursor=cursor)


async def _resolve(runtime: Callable[[], BudgetRuntime], body: bytes) -> ResolveReply:
    try:
        query = decode_untrusted(_resolve_query, body)
    except msgspec.DecodeError as error:
        return ResolveReply(ok=False, reason=f"not a resolve query: {error}")
    if not (TOKEN.match(query.principal) and TOKEN.match(query.request_id)):
        return ResolveReply(ok=False, reason=f"principal and request_id must match {TOKEN.pattern}")
    try:
        answer = await resolve(runtime().spending.ledger, query.principal, query.request_id, query.ran)
    except (BudgetUnavailable, RuntimeError) as error:
        return ResolveReply(ok=False, reason=getattr(error, "reason", None) or "the policy service is starting")
    log.warning(
        "budget resolution by the operator: %s/%s ran=%s: %s",
        query.principal,
        query.request_id,
        query.ran,
        answer.reason,
    )
    return answer
