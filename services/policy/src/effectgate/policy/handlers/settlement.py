"""The settlement edge: receipts settle the spend budgets' reservations."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.contracts.bus import catalog
from effectgate.contracts.events import ReceiptIssued, decode_untrusted
from effectgate.contracts.integrity.signing import signed_by
from effectgate.contracts.security import SecurityKind
from effectgate.policy.budgets.settlement import may_hold_reservation, settle_receipt
from effectgate.policy.errors import BudgetsLost, BudgetUnavailable
from effectgate.policy.pipeline.admission import Spending
from effectgate.shared.consumer.consumers import Consumer, Delivery
from effectgate.shared.consumer.worker import Later, Settle, Settlement
from effectgate.shared.runtime.reporting import SecurityReporter

__all__ = ["REBUILD_WAIT_S", "BudgetRuntime", "budget_consumers"]

_receipt = msgspec.json.Decoder(ReceiptIssued)

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
    """The receipts consumer that settles reservations."""

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

    return [Consumer(catalog.POLICY_RECEIPTS, on_receipt, handler_timeout_s=10.0)]


async def _settled(rt: BudgetRuntime, receipt: ReceiptIssued) -> Settlement:
    try:
        await settle_receipt(receipt, rt.spending)
    except BudgetsLost:
        return Later(REBUILD_WAIT_S)
    except BudgetUnavailable:
        return Settle.RETRY
    return Settle.ACK


def _verified(rt: BudgetRuntime, delivery: Delivery, receipt: ReceiptIssued) -> bool:
    """Whether the delivered ``receipt`` names its subject's request and is executor-signed (else reported)."""
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
