"""The executor's broker edge: decisions and approvals in, receipts out."""

from __future__ import annotations

import msgspec
from faststream.nats import NatsRouter

from toolgate.executor.service import Executor
from toolgate.shared import catalog
from toolgate.shared.events import ApprovalGranted, ApprovalRejected, ApprovalRequested, DecisionMade, decode_untrusted
from toolgate.shared.handling import Delivery, Settle, durable_subscriber
from toolgate.shared.service import RuntimeCell

__all__ = ["build_router"]

_decision = msgspec.json.Decoder(DecisionMade)
_approval = msgspec.json.Decoder(ApprovalGranted | ApprovalRejected | ApprovalRequested)


def build_router(cell: RuntimeCell[Executor]) -> NatsRouter:
    """Route decisions and approval outcomes to the :class:`Executor`."""
    router = NatsRouter()

    async def on_decision(delivery: Delivery) -> Settle:
        try:
            decision = decode_untrusted(_decision, delivery.data)
        except msgspec.DecodeError:
            return Settle.TERM
        return await cell().on_decision(decision, delivery.num_delivered)

    async def on_approval(delivery: Delivery) -> Settle:
        try:
            event = decode_untrusted(_approval, delivery.data)
        except msgspec.DecodeError:
            return Settle.TERM
        if isinstance(event, ApprovalGranted):
            return await cell().on_granted(event, delivery.num_delivered)
        if isinstance(event, ApprovalRejected):
            return await cell().on_rejected(event)
        return Settle.ACK

    durable_subscriber(router, catalog.EXECUTOR_DECISIONS, on_decision)
    durable_subscriber(router, catalog.EXECUTOR_APPROVALS, on_approval)
    return router
