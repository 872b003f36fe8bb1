"""Settling spend reservations: by each request's receipt, and by an operator for an ``uncertain`` one."""

from __future__ import annotations

from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.vocabulary import Outcome
from effectgate.policy.budgets.ledger import RecordState
from effectgate.policy.budgets.reconciliation import ResolveReply
from effectgate.policy.budgets.rules import BudgetBook
from effectgate.policy.pipeline.admission import Spending
from effectgate.policy.ports import BudgetLedger

__all__ = ["may_hold_reservation", "resolve", "settle_receipt", "target_of"]


def target_of(outcome: Outcome) -> RecordState:
    """Where a receipt with ``outcome`` moves its request's reservation (the module's table)."""
    if outcome is Outcome.SUCCEEDED:
        return RecordState.COMMITTED
    if outcome is Outcome.UNCERTAIN:
        return RecordState.UNCERTAIN
    return RecordState.RELEASED


def may_hold_reservation(receipt: ReceiptIssued, book: BudgetBook) -> bool:
    """Whether ``receipt``'s request may hold a reservation (the module's rule); its signature is not checked here.

    ``True`` when the receipt does not name its tool and operation, or some budget of
    ``book`` applies to its call; ``False`` means: nothing to settle, pass it over.
    """
    if receipt.tool is None or receipt.operation is None:
        return True
    return bool(book.applying(receipt.principal, receipt.tool, receipt.operation))


async def settle_receipt(receipt: ReceiptIssued, spending: Spending) -> RecordState | None:
    """Apply one (verified) receipt to its request's reservation; returns the state it was in.

    A receipt of a request charged nowhere leaves an ``ended`` record while budgets are in
    force (a re-check racing the receipt then charges nothing); without budgets, nothing.

    Raises:
        BudgetUnavailable: the ledger cannot answer (retry).
        BudgetsLost: the ledger is being rebuilt (retry once it is).
    """
    to, end = target_of(receipt.outcome), bool(spending.book.budgets)
    return await spending.ledger.settle(receipt.principal, receipt.request_id, to, end=end)


async def resolve(ledger: BudgetLedger, principal: str, request_id: str, ran: bool) -> ResolveReply:
    """Resolve the uncertain reservation of ``request_id``: commit it (``ran``) or release it.

    Only an ``uncertain`` reservation moves; any other is left as it is and said so.

    Raises:
        BudgetUnavailable: the ledger cannot answer.
    """
    to = RecordState.COMMITTED if ran else RecordState.RELEASED
    was = await ledger.settle(principal, request_id, to, only_from=RecordState.UNCERTAIN, end=False)
    if was is None:
        return ResolveReply(ok=False, reason=f"no reservation is recorded for {principal}/{request_id}")
    if was is not RecordState.UNCERTAIN:
        reason = f"the reservation is {was.value}, not uncertain: nothing changed"
        return ResolveReply(ok=False, state=was.value, reason=reason)
    reason = f"the uncertain reservation of {principal}/{request_id} is now {to.value}"
    return ResolveReply(ok=True, state=to.value, reason=reason)
