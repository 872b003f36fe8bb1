"""The settlement edge: receipts settle the spend budgets' reservations, resolutions the ``uncertain`` ones.

A resolution (``tg.resolution.<principal>.<request_id>``, executor-signed) ``ran`` commits an
``uncertain`` reservation, ``not_run`` releases it, ``unknown`` leaves it held
(:func:`~effectgate.policy.budgets.settlement.resolve`). A resolution that arrives while its
request's receipt has not yet marked the reservation ``uncertain`` waits for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.contracts.bus import catalog
from effectgate.contracts.events import ReceiptIssued, UncertainResolved, decode_untrusted
from effectgate.contracts.integrity.signing import signed_by
from effectgate.contracts.security import SecurityKind
from effectgate.policy.budgets.ledger import RecordState
from effectgate.policy.budgets.settlement import may_hold_reservation, resolve, settle_receipt
from effectgate.policy.errors import BudgetsLost, BudgetUnavailable
from effectgate.policy.pipeline.admission import Spending
from effectgate.shared.consumer.consumers import Consumer, Delivery
from effectgate.shared.consumer.worker import Later, Settle, Settlement
from effectgate.shared.runtime.reporting import SecurityReporter

__all__ = ["REBUILD_WAIT_S", "BudgetRuntime", "budget_consumers"]

_receipt = msgspec.json.Decoder(ReceiptIssued)
_resolution = msgspec.json.Decoder(UncertainResolved)

REBUILD_WAIT_S = 2.0
"""How long a receipt waits while the ledger is rebuilt, seconds."""


@dataclass
class BudgetRuntime:
    """What the budget handlers need once the service has started.

    Attributes:
        spending: the budgets in force and their ledger.
        receipts_key: the executor's receipts public key (only its receipts settle).
        reporter: reports forged receipts.
    """

    spending: Spending
    receipts_key: Ed25519PublicKey
    reporter: SecurityReporter


def budget_consumers(runtime: Callable[[], BudgetRuntime]) -> list[Consumer]:
    """The receipts consumer that settles reservations, and the resolutions consumer that settles uncertain ones."""

    async def on_receipt(delivery: Delivery) -> Settlement:
        rt = runtime()
        try:
            receipt = decode_untrusted(_receipt, delivery.data)
        except msgspec.DecodeError:
            return Settle.TERM
        if not may_hold_reservation(receipt, rt.spending.book):
            return Settle.ACK  # no budget applies: nothing to settle, nothing verified (settling.py)
        if not _verified(rt, delivery, receipt):
            return Settle.TERM
        return await _settled(rt, receipt)

    async def on_resolution(delivery: Delivery) -> Settlement:
        rt = runtime()
        try:
            resolution = decode_untrusted(_resolution, delivery.data)
        except msgspec.DecodeError:
            return Settle.TERM
        if resolution.resolution == "unknown":
            return Settle.ACK  # still held: the operator resolves it
        if not _verified(rt, delivery, resolution):
            return Settle.TERM
        return await _resolved(rt, resolution)

    return [
        Consumer(catalog.POLICY_RECEIPTS, on_receipt, handler_timeout_s=10.0),
        Consumer(catalog.POLICY_RESOLUTIONS, on_resolution, handler_timeout_s=10.0),
    ]


async def _resolved(rt: BudgetRuntime, resolution: UncertainResolved) -> Settlement:
    """Commit (``ran``) or release (``not_run``) the request's ``uncertain`` reservation."""
    try:
        answer = await resolve(
            rt.spending.ledger, resolution.principal, resolution.request_id, resolution.resolution == "ran"
        )
    except BudgetsLost:
        return Later(REBUILD_WAIT_S)
    except BudgetUnavailable:
        return Settle.RETRY
    if answer.state == RecordState.RESERVED.value:
        return Later(REBUILD_WAIT_S)  # its uncertain receipt has not been settled yet: it comes first
    return Settle.ACK


async def _settled(rt: BudgetRuntime, receipt: ReceiptIssued) -> Settlement:
    try:
        await settle_receipt(receipt, rt.spending)
    except BudgetsLost:
        return Later(REBUILD_WAIT_S)
    except BudgetUnavailable:
        return Settle.RETRY
    return Settle.ACK


def _verified(rt: BudgetRuntime, delivery: Delivery, receipt: ReceiptIssued | UncertainResolved) -> bool:
    """Whether the delivered ``receipt`` (or resolution) names its subject's request and is executor-signed.

    Else it is reported as forged and settles nothing.
    """
    names_its_request = catalog.names_its_request(delivery.subject, receipt)
    if names_its_request and signed_by(delivery.data, rt.receipts_key):
        return True
    rt.reporter.report(
        SecurityKind.RECEIPT_FORGED,
        principal=receipt.principal,
        request_id=receipt.request_id,
        subject=delivery.subject,
        reason_code="signature_invalid",
        detail="not an executor-signed receipt of the request its subject names: no budget settled",
        payload=delivery.data,
    )
    return False
