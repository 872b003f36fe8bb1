"""The policy service's broker edge: request in, signed decision out, ack."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from faststream.nats import NatsRouter
from nats.js import JetStreamContext

from toolgate.policy.domain import Envelope, PolicyPorts, decide
from toolgate.shared import catalog
from toolgate.shared.bus import publish_event
from toolgate.shared.catalog import TOKEN, Subjects
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
    """Principal from the subject token; fallback request id from ``Nats-Msg-Id`` or the sequence."""
    principal = delivery.subject.split(".", 2)[2]
    msg_id = delivery.headers.get("Nats-Msg-Id", "")
    fallback = msg_id if TOKEN.match(msg_id) else f"seq{delivery.stream_seq}"
    return Envelope(principal=principal, data=delivery.data, fallback_request_id=fallback)


def build_router(runtime: Callable[[], PolicyRuntime]) -> NatsRouter:
    """Route tool requests to :func:`decide`; ``runtime`` is resolved per message."""
    router = NatsRouter()

    async def on_request(delivery: Delivery) -> Settle:
        rt = runtime()
        decision = sign_event(await decide(envelope_of(delivery), rt.ports), rt.key)
        await publish_event(rt.js, Subjects.decision(decision.principal, decision.request_id), decision)
        return Settle.ACK

    durable_subscriber(router, catalog.POLICY_CONSUMER, on_request)
    return router
