"""The approvals service's broker edge: bytes in, the workflow's answer out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgspec
from faststream.nats import NatsMessage, NatsRouter

from effectgate.approvals.domain import DecideReply, command_of
from effectgate.approvals.errors import ApprovalsError, DecideRefused
from effectgate.approvals.listing import list_page, show
from effectgate.approvals.rebuild import Rebuilder
from effectgate.approvals.service import Approvals
from effectgate.approvals.service.core import refusal_reply
from effectgate.approvals.standing import status_bytes
from effectgate.approvals.withdrawal import withdraw_bytes
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects, token_of
from effectgate.contracts.errors import IndexLost
from effectgate.contracts.events import DecisionMade, decode_untrusted
from effectgate.shared.consumer.consumers import Consumer, Delivery
from effectgate.shared.consumer.worker import Later, Settle, Settlement
from effectgate.shared.runtime.assembly import max_payload_of, rpc

__all__ = [
    "MAX_COMMAND_BYTES",
    "ApprovalsRuntime",
    "answer_bytes",
    "build_router",
    "consumers",
    "decision_bytes",
    "give_up_bytes",
]

MAX_COMMAND_BYTES = 4096
"""Largest accepted approve/reject/withdraw command, bytes."""
_decision = msgspec.json.Decoder(DecisionMade)


@dataclass
class ApprovalsRuntime:
    """What the handlers need once the service has started."""

    approvals: Approvals
    rebuilder: Rebuilder


def consumers(runtime: Callable[[], ApprovalsRuntime]) -> list[Consumer]:
    """Decisions open approvals; one whose approval cannot be opened is ended on its last delivery."""

    async def on_decision(delivery: Delivery) -> Settlement:
        rt = runtime()
        try:
            return await decision_bytes(rt.approvals, delivery.data, delivery.subject)
        except IndexLost:
            rt.rebuilder.start()
            return Later(2.0)
        except ApprovalsError:
            return Settle.RETRY

    async def give_up(delivery: Delivery) -> None:
        await give_up_bytes(runtime().approvals, delivery.data)

    return [Consumer(catalog.APPROVALS_CONSUMER, on_decision, give_up, handler_timeout_s=30.0)]


async def decision_bytes(approvals: Approvals, data: bytes, subject: str) -> Settle:
    """Handle one delivered decision, copied to ``tg.needs_approval.<p>.<rid>``.

    Returns:
        ``ACK`` when handled, ``TERM`` for an undecodable or forged decision, or one
        about another request than the one its subject names (a genuine decision of
        another request placed there opens nothing; the audit reports it).

    Raises:
        ApprovalsError: the store cannot answer (the consumer retries, then gives up).
    """
    try:
        decision = decode_untrusted(_decision, data)
    except msgspec.DecodeError:
        return Settle.TERM
    if subject != Subjects.needs_approval(decision.principal, decision.request_id):
        return Settle.TERM
    return Settle.ACK if await approvals.on_decision(decision) else Settle.TERM


async def give_up_bytes(approvals: Approvals, data: bytes) -> None:
    """The consumer's give-up: end the request of a decision whose approval could not be opened."""
    try:
        decision = decode_untrusted(_decision, data)
    except msgspec.DecodeError:
        return
    await approvals.give_up(decision)


async def answer_bytes(approvals: Approvals, approver: str, data: bytes) -> DecideReply:
    """Decode and carry out one command of ``approver``; never raises for its content.

    An oversized or malformed command is refused and reported (its SHA-256, not its bytes).
    """
    command = command_of(data, MAX_COMMAND_BYTES)
    if isinstance(command, DecideRefused):
        return approvals.refusal(approver, command, payload=data)
    try:
        return await approvals.answer(approver, command)
    except (ApprovalsError, IndexLost) as error:
        return refusal_reply(error.reason_code, error.reason)


def build_router(runtime: Callable[[], ApprovalsRuntime]) -> NatsRouter:
    """Route list, show, decide, withdraw and status requests to the :class:`Approvals` workflow."""
    router = NatsRouter()

    @rpc(router, Rpc.APPROVALS_LIST, "approvals")
    async def on_list(msg: NatsMessage) -> bytes:
        approvals = runtime().approvals
        found = await list_page(approvals.store, approvals.bus, msg.raw_message.data or b"", max_payload_of(msg))
        return msgspec.json.encode(found)

    @rpc(router, Rpc.APPROVALS_SHOW, "approvals")
    async def on_show(msg: NatsMessage) -> bytes:
        approvals = runtime().approvals
        found = await show(approvals.store, approvals.bus, msg.raw_message.data or b"", max_payload_of(msg))
        return msgspec.json.encode(found)

    @rpc(router, Rpc.APPROVALS_DECIDE, "approvals")
    async def on_decide(msg: NatsMessage) -> bytes:
        approver = token_of(Rpc.APPROVALS_DECIDE, msg.raw_message.subject) or ""  # a foreign token is nobody
        return msgspec.json.encode(await answer_bytes(runtime().approvals, approver, msg.raw_message.data or b""))

    @rpc(router, Rpc.APPROVALS_WITHDRAW, "approvals")
    async def on_withdraw(msg: NatsMessage) -> bytes:
        principal = token_of(Rpc.APPROVALS_WITHDRAW, msg.raw_message.subject) or ""  # the transport's identity
        return msgspec.json.encode(await withdraw_bytes(runtime().approvals, principal, msg.raw_message.data or b""))

    @rpc(router, Rpc.APPROVALS_STATUS, "approvals")
    async def on_status(msg: NatsMessage) -> bytes:
        asker = token_of(Rpc.APPROVALS_STATUS, msg.raw_message.subject) or ""  # the transport's identity
        return msgspec.json.encode(await status_bytes(runtime().approvals, asker, msg.raw_message.data or b""))

    return router
