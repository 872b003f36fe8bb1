"""The chat-ops bot's broker edge: approval events and receipts in, cards out.

Approval events are consumed in stream order by one worker (a card is posted before it is
edited). Only events signed by the approvals key make or change a card, and only receipts
signed by the executor's receipts key are posted as outcomes; anything else is terminated and
reported (``approval_forged``, ``receipt_forged``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.chatops.errors import ChatRefused, ChatUnavailable
from effectgate.chatops.service import ApprovalEvent, ChatOps
from effectgate.contracts.bus import catalog
from effectgate.contracts.events import ReceiptIssued, decode_untrusted
from effectgate.contracts.integrity.signing import verify_event
from effectgate.contracts.security import SecurityKind
from effectgate.shared.consumer.consumers import Consumer, Delivery
from effectgate.shared.consumer.worker import Later, Settle, Settlement

__all__ = ["ChatOpsRuntime", "consumers", "retry_delay_s"]

log = logging.getLogger("effectgate.chatops")

MAX_RETRY_DELAY_S = 60.0
"""Longest wait between two attempts while chat is unavailable, seconds."""

_approval_event = msgspec.json.Decoder(ApprovalEvent)
_receipt = msgspec.json.Decoder(ReceiptIssued)


@dataclass
class ChatOpsRuntime:
    """What the handlers need once the bot has started.

    Attributes:
        chatops: the workflow.
        approvals_key: the approvals public key (cards show only signed approvals).
        receipts_key: the executor's receipts public key (only signed outcomes are posted).
    """

    chatops: ChatOps
    approvals_key: Ed25519PublicKey
    receipts_key: Ed25519PublicKey


def retry_delay_s(error: ChatUnavailable, num_delivered: int) -> float:
    """Back-off while chat is unavailable: chat's own ``Retry-After`` if given, else 2^n s, at most 60 s."""
    if error.retry_after_s is not None:
        return min(max(error.retry_after_s, 0.5), MAX_RETRY_DELAY_S)
    return min(2.0**num_delivered, MAX_RETRY_DELAY_S)


def consumers(runtime: Callable[[], ChatOpsRuntime]) -> list[Consumer]:
    """Approval events (in order, one worker) and receipts."""

    async def on_approval(delivery: Delivery) -> Settlement:
        rt = runtime()
        event = _verified(rt, delivery, _approval_event, rt.approvals_key, SecurityKind.APPROVAL_FORGED)
        return Settle.TERM if event is None else await _chat(rt.chatops.on_event(event), delivery)

    async def on_receipt(delivery: Delivery) -> Settlement:
        rt = runtime()
        receipt = _verified(rt, delivery, _receipt, rt.receipts_key, SecurityKind.RECEIPT_FORGED)
        return Settle.TERM if receipt is None else await _chat(rt.chatops.on_receipt(receipt), delivery)

    return [
        Consumer(catalog.CHATOPS_APPROVALS, on_approval, max_workers=1, handler_timeout_s=120.0),
        Consumer(catalog.CHATOPS_RECEIPTS, on_receipt, max_workers=1, handler_timeout_s=120.0),
    ]


E = TypeVar("E", ApprovalEvent, ReceiptIssued)


def _verified(
    rt: ChatOpsRuntime, delivery: Delivery, decoder: msgspec.json.Decoder[E], key: Ed25519PublicKey, kind: SecurityKind
) -> E | None:
    """The delivered event when it decodes and is signed by ``key``; ``None`` (reported when forged) otherwise."""
    try:
        event = decode_untrusted(decoder, delivery.data)
    except msgspec.DecodeError:
        return None
    if not verify_event(event, key):
        signer = "approvals" if kind is SecurityKind.APPROVAL_FORGED else "receipts"
        _forged(rt, delivery.subject, event, kind, signer)
        return None
    return event


async def _chat(work: Awaitable[None], delivery: Delivery) -> Settlement:
    try:
        await work
    except ChatUnavailable as error:
        return Later(retry_delay_s(error, delivery.num_delivered))
    except ChatRefused as refused:  # a deleted card, a room the bot left: the approval is unaffected
        log.error("chat refused the update for %s: %s", delivery.subject, refused.reason)
    return Settle.ACK


def _forged(
    rt: ChatOpsRuntime, subject: str, event: ApprovalEvent | ReceiptIssued, kind: SecurityKind, key: str
) -> None:
    rt.chatops.reporter.report(
        kind,
        principal=event.principal,
        request_id=event.request_id,
        approval_id=getattr(event, "approval_id", None),
        subject=subject,
        reason_code="signature_invalid",
        detail=f"not signed by the {key} key: nothing shown in chat",
    )
