"""The policy service's broker edge: request in, signed decision out; re-checks, listings, readiness, publications."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from faststream.nats import NatsMessage, NatsRouter
from nats.js import JetStreamContext

from toolgate.policy.domain import Envelope, PolicyPorts, decide, fault_denial
from toolgate.policy.publishing import Publisher, PublishReply, policy_text, refused
from toolgate.policy.recheck import recheck
from toolgate.policy.tool_listing import get_for, list_for, principal_of
from toolgate.shared import catalog
from toolgate.shared.bus import publish_once
from toolgate.shared.catalog import Rpc, Subjects
from toolgate.shared.events import DecisionMade, decode_untrusted, request_identity
from toolgate.shared.failpoints import failpoint
from toolgate.shared.handling import Consumer, Delivery, Settle, Settlement
from toolgate.shared.listing import Readiness
from toolgate.shared.recheck import RecheckQuery
from toolgate.shared.service import rpc
from toolgate.shared.signing import sign_event

__all__ = ["PolicyRuntime", "build_router", "consumers", "envelope_of"]

_query = msgspec.json.Decoder(RecheckQuery)

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


def envelope_of(delivery: Delivery) -> Envelope:
    """Principal from the subject token; request id by :func:`request_identity`."""
    principal = delivery.subject.split(".", 2)[2]
    request_id = request_identity(delivery.data, delivery.headers.get("Nats-Msg-Id"), delivery.stream_seq)
    copied_from = delivery.headers.get("Nats-Stream")
    return Envelope(principal=principal, data=delivery.data, request_id=request_id, copied_from=copied_from)


async def _publish(rt: PolicyRuntime, decision: DecisionMade) -> None:
    signed = sign_event(decision, rt.key)
    await publish_once(rt.js, Subjects.decision(signed.principal, signed.request_id), signed)


def consumers(runtime: Callable[[], PolicyRuntime]) -> list[Consumer]:
    """Tool requests to :func:`decide`; a request still failing on its last delivery is denied."""

    async def on_request(delivery: Delivery) -> Settlement:
        rt, envelope = runtime(), envelope_of(delivery)
        await failpoint("policy.decide", envelope.request_id)
        await _publish(rt, await decide(envelope, rt.ports))
        return Settle.ACK

    async def give_up(delivery: Delivery) -> None:
        rt, envelope = runtime(), envelope_of(delivery)
        reason = f"no decision could be made in {delivery.num_delivered} attempts: denied (fail closed)"
        await _publish(rt, fault_denial(envelope, rt.ports.clock(), "policy_fault", reason))

    return [Consumer(catalog.POLICY_CONSUMER, on_request, give_up, handler_timeout_s=HANDLER_TIMEOUT_S)]


_STARTING = Readiness(ready=False, reason="the policy service is starting")


def build_router(runtime: Callable[[], PolicyRuntime], clock: Callable[[], datetime]) -> NatsRouter:
    """Answer re-checks (signed), per-caller listings and readiness.

    ``tg.policy.recheck``: a signed :class:`~toolgate.shared.recheck.RecheckAnswer`;
    ``tg.tools.list.<p>`` / ``tg.tools.get.<p>``: a :class:`~toolgate.shared.listing.ToolsReply`
    for principal ``<p>``; ``tg.policy.ready``: a :class:`~toolgate.shared.listing.Readiness`
    naming the version in force and the replica that answered; ``tg.policy.publish``
    (operators only, by NATS permissions): a :class:`~toolgate.policy.publishing.PublishReply`.
    """
    router = NatsRouter()

    @rpc(router, Rpc.TOOLS_LIST, "policy")
    async def on_list(msg: NatsMessage) -> bytes:
        return msgspec.json.encode(await list_for(principal_of(msg.raw_message.subject), runtime().ports))

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
        text = policy_text(msg.raw_message.data or b"", rt.max_policy_bytes)
        reply = text if isinstance(text, PublishReply) else await rt.publisher.publish(text, "cli")
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
