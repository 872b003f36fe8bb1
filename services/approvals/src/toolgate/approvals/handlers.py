"""The approvals service's broker edge: decisions in, commands answered, expiry swept."""

from __future__ import annotations

import msgspec
from faststream.nats import NatsMessage, NatsRouter

from toolgate.approvals.domain import DecideCommand, DecideReply
from toolgate.approvals.errors import ApprovalsError
from toolgate.approvals.service import Approvals
from toolgate.shared import catalog
from toolgate.shared.catalog import Rpc
from toolgate.shared.events import DecisionMade, decode_untrusted
from toolgate.shared.handling import Delivery, Settle, durable_subscriber, raw_body
from toolgate.shared.service import RuntimeCell

__all__ = ["build_router"]

MAX_COMMAND_BYTES = 4096
_decision = msgspec.json.Decoder(DecisionMade)
_command = msgspec.json.Decoder(DecideCommand)


def _refusal(code: str, reason: str) -> bytes:
    return msgspec.json.encode(DecideReply(ok=False, reason_code=code, reason=reason))


def build_router(cell: RuntimeCell[Approvals]) -> NatsRouter:
    """Route decisions, list and decide commands to the :class:`Approvals` workflow."""
    router = NatsRouter()

    async def on_decision(delivery: Delivery) -> Settle:
        try:
            decision = decode_untrusted(_decision, delivery.data)
        except msgspec.DecodeError:
            return Settle.TERM
        return Settle.ACK if await cell().on_decision(decision) else Settle.TERM

    durable_subscriber(router, catalog.APPROVALS_CONSUMER, on_decision)

    @router.subscriber(Rpc.APPROVALS_LIST, queue="approvals", decoder=raw_body, include_in_schema=False)
    async def on_list(msg: NatsMessage) -> bytes:
        try:
            return msgspec.json.encode(await cell().store.list_pending())
        except ApprovalsError as error:
            return _refusal(error.reason_code, error.reason)

    @router.subscriber(Rpc.APPROVALS_DECIDE, queue="approvals", decoder=raw_body, include_in_schema=False)
    async def on_decide(msg: NatsMessage) -> bytes:
        approver = msg.raw_message.subject.rsplit(".", 1)[1]
        data = msg.raw_message.data or b""
        if len(data) > MAX_COMMAND_BYTES:
            return _refusal("oversized", f"command is {len(data)} bytes; the limit is {MAX_COMMAND_BYTES}")
        try:
            return msgspec.json.encode(await cell().answer(approver, decode_untrusted(_command, data)))
        except msgspec.DecodeError as error:
            return _refusal("malformed", f"not an approve/reject command: {error}")
        except ApprovalsError as error:
            return _refusal(error.reason_code, error.reason)

    return router
