"""The approvals service's broker edge: bytes in, the workflow's answer out."""

from __future__ import annotations

import msgspec
from faststream.nats import NatsMessage, NatsRouter

from toolgate.approvals.service import Approvals
from toolgate.shared import catalog
from toolgate.shared.catalog import APPROVALS_CONSUMER, Rpc
from toolgate.shared.handling import Delivery, Settle, durable_subscriber, raw_body
from toolgate.shared.service import RuntimeCell

__all__ = ["build_router"]


def build_router(cell: RuntimeCell[Approvals]) -> NatsRouter:
    """Route decisions, list and decide commands to the :class:`Approvals` workflow."""
    router = NatsRouter()

    async def on_decision(delivery: Delivery) -> Settle:
        return await cell().on_decision_bytes(
            delivery.data, last_try=delivery.num_delivered >= APPROVALS_CONSUMER.max_deliver - 1
        )

    durable_subscriber(router, catalog.APPROVALS_CONSUMER, on_decision)

    @router.subscriber(Rpc.APPROVALS_LIST, queue="approvals", decoder=raw_body, include_in_schema=False)
    async def on_list(msg: NatsMessage) -> bytes:
        return msgspec.json.encode(await cell().list_pending())

    @router.subscriber(Rpc.APPROVALS_DECIDE, queue="approvals", decoder=raw_body, include_in_schema=False)
    async def on_decide(msg: NatsMessage) -> bytes:
        approver = msg.raw_message.subject.rsplit(".", 1)[1]
        return msgspec.json.encode(await cell().answer_bytes(approver, msg.raw_message.data or b""))

    return router
