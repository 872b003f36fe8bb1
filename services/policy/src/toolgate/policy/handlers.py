"""The policy service's broker edge: request in, signed decision out, ack."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from faststream.nats import NatsRouter
from nats.js import JetStreamContext

from toolgate.policy.domain import Envelope, PolicyPorts, decide
from toolgate.shared import catalog
from toolgate.shared.bus import publish_once
from toolgate.shared.catalog import Subjects
from toolgate.shared.events import request_identity
from toolgate.shared.handling import Delivery, Settle, durable_subscriber
from toolgate.shared.signing import sign_event

__all__ = ["PolicyRuntime", "build_router", "envelope_of"]


@dataclass
class PolicyRuntime:
    """What the handler needs once the service has started."""

    ports: PolicyPorts
    key: Ed25519PrivateKey
    js: JetStreamContext


def envelope_of(delivery: Delivery) -> Envelope:
    """Principal from the subject token; request id by :func:`request_identity`."""
    principal = delivery.subject.split(".", 2)[2]
    request_id = request_identity(delivery.data, delivery.headers.get("Nats-Msg-Id"), delivery.stream_seq)
    return Envelope(principal=principal, data=delivery.data, request_id=request_id)


def build_router(runtime: Callable[[], PolicyRuntime]) -> NatsRouter:
    """Route tool requests to :func:`decide`; ``runtime`` is resolved per message."""
    router = NatsRouter()

    async def on_request(delivery: Delivery) -> Settle:
        rt = runtime()
        decision = sign_event(await decide(envelope_of(delivery), rt.ports), rt.key)
        await publish_once(rt.js, Subjects.decision(decision.principal, decision.request_id), decision)
        return Settle.ACK

    durable_subscriber(router, catalog.POLICY_CONSUMER, on_request)
    return router
