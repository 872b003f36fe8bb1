"""The approvals service's broker edge: bytes in, the workflow's answer out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgspec
from faststream.nats import NatsMessage, NatsRouter

from toolgate.approvals.errors import ApprovalsError, IndexLost
from toolgate.approvals.listing import list_page, show
from toolgate.approvals.rebuild import Rebuilder
from toolgate.approvals.service import Approvals
from toolgate.approvals.standing import status_bytes
from toolgate.approvals.withdrawal import withdraw_bytes
from toolgate.contracts import catalog
from toolgate.contracts.catalog import Rpc
from toolgate.shared.handling import Consumer, Delivery, Later, Settle, Settlement
from toolgate.shared.service import max_payload_of, rpc

__all__ = ["ApprovalsRuntime", "build_router", "consumers"]


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
            return await rt.approvals.on_decision_bytes(delivery.data, delivery.subject)
        except IndexLost:
            rt.rebuilder.start()
            return Later(2.0)
        except ApprovalsError:
            return Settle.RETRY

    async def give_up(delivery: Delivery) -> None:
        await runtime().approvals.give_up_bytes(delivery.data)

    return [Consumer(catalog.APPROVALS_CONSUMER, on_decision, give_up, handler_timeout_s=30.0)]


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
        approver = msg.raw_message.subject.rsplit(".", 1)[1]
        return msgspec.json.encode(await runtime().approvals.answer_bytes(approver, msg.raw_message.data or b""))

    @rpc(router, Rpc.APPROVALS_WITHDRAW, "approvals")
    async def on_withdraw(msg: NatsMessage) -> bytes:
        principal = msg.raw_message.subject.rsplit(".", 1)[1]  # the transport's identity, never the body
        return msgspec.json.encode(await withdraw_bytes(runtime().approvals, principal, msg.raw_message.data or b""))

    @rpc(router, Rpc.APPROVALS_STATUS, "approvals")
    async def on_status(msg: NatsMessage) -> bytes:
        asker = msg.raw_message.subject.rsplit(".", 1)[1]  # the transport's identity, never the body
        return msgspec.json.encode(await status_bytes(runtime().approvals, asker, msg.raw_message.data or b""))

    return router
