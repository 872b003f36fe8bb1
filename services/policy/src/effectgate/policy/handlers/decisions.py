"""The decision edge: tool requests in, signed decisions out; and the re-check before an effect."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from faststream.nats import NatsMessage, NatsRouter
from nats.js import JetStreamContext

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.events import DecisionMade, decode_untrusted, request_identity
from effectgate.contracts.failpoints import failpoint
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.rpc.recheck import RecheckQuery
from effectgate.policy.handlers.request_line import note_decision
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.publishing import Publisher
from effectgate.policy.pipeline.recheck import recheck
from effectgate.policy.service import Envelope, PolicyPorts, fault_denial
from effectgate.shared.consumer.consumers import Consumer, Delivery
from effectgate.shared.consumer.worker import Settle, Settlement
from effectgate.shared.runtime.assembly import rpc
from effectgate.shared.runtime.metrics import record_stage
from effectgate.shared.runtime.reporting import SecurityReporter
from effectgate.shared.stores.stream import publish_once

__all__ = ["HANDLER_TIMEOUT_S", "Asker", "PolicyRuntime", "consumers", "envelope_of", "route_recheck"]

_query = msgspec.json.Decoder(RecheckQuery)

HANDLER_TIMEOUT_S = 30.0
"""A decision still being made after this long is cancelled and retried, seconds."""

Asker = Callable[[DecisionMade, bool], Awaitable[None]]
"""Copies a signed decision that needs approval for the approvals service, given whether it was
stored (``adapters.asking.ask_for_approval``; raises ``nats.errors.Error`` when it cannot)."""


@dataclass
class PolicyRuntime:
    """What the handlers need once the service has started.

    ``ask``: the copy of a decision that needs approval (:data:`Asker`).
    """

    ports: PolicyPorts
    key: Ed25519PrivateKey
    js: JetStreamContext
    publisher: Publisher
    replica: str
    max_policy_bytes: int
    ask: Asker
    reporter: SecurityReporter | None = None


def envelope_of(delivery: Delivery) -> Envelope:
    """Principal from the subject (the intake refuses one that is no token); request id: :func:`request_identity`."""
    subject = delivery.subject
    principal = catalog.principal_of_request(subject) or catalog.claimed_principal_of_request(subject) or ""
    request_id = request_identity(delivery.data, delivery.headers.get("Nats-Msg-Id"), delivery.stream_seq)
    copied_from = delivery.headers.get("Nats-Stream")
    first = delivery.num_delivered == 1
    return Envelope(principal, delivery.data, request_id, copied_from=copied_from, first_delivery=first)


async def _publish(rt: PolicyRuntime, decision: DecisionMade, data: bytes) -> None:
    signed = sign_event(decision, rt.key)
    stored = await publish_once(rt.js, Subjects.decision(signed.principal, signed.request_id), signed)
    note_decision(decision, data, stored)
    await rt.ask(signed, stored)


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

    fair = catalog.principal_of_event
    return [Consumer(catalog.POLICY_CONSUMER, on_request, give_up, handler_timeout_s=HANDLER_TIMEOUT_S, fair_by=fair)]


def route_recheck(router: NatsRouter, runtime: Callable[[], PolicyRuntime], clock: Callable[[], datetime]) -> None:
    """Answer ``tg.policy.recheck`` on ``router``: a signed answer, or an error for a body that is no query."""

    @rpc(router, Rpc.POLICY_RECHECK, "policy")
    async def on_recheck(msg: NatsMessage) -> bytes:
        rt = runtime()
        try:
            query = decode_untrusted(_query, msg.raw_message.data or b"")
        except msgspec.DecodeError as error:
            return msgspec.json.encode({"error": f"not a recheck query: {error}"})
        return msgspec.json.encode(sign_event(await recheck(query, rt.ports, clock), rt.key))
