"""The ledger's tools, declared for effectgate and served by ``effectgate worker ledger.tools --name ledger``.

- ``refunds.refund`` moves money (FINANCIAL): approved by people, run once, its refund id the receipt's
  target effect id, and reconciled by ``refunds.refund_status`` when its outcome is uncertain.
- ``lookup_order`` reads (retried when the ledger is busy); ``export_report`` streams rows;
  ``journal.post`` is not safe to run twice at once on one account, so calls on an account run one at a time;
  it records the call that made it, which its reconcile step ``journal.posting_status`` looks for.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated

from pydantic import BaseModel, Field

from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools import Context, Dependencies, Effect, Fault, Provided, Reconciled, Refusal, Retry, operation, tool
from ledger.store import Ledger, LedgerError

OrderId = Annotated[str, Field(pattern=r"^[A-Z0-9-]{1,32}$", description="An order id, e.g. ORD-1001")]
Amount = Annotated[float, Field(gt=0, le=100_000, description="How much to refund, in the order's currency")]
Account = Annotated[str, Field(pattern=r"^[a-z0-9-]{1,32}$", description="A journal account, e.g. sales-eu")]
HoldS = Annotated[float, Field(ge=0, le=5, description="Seconds the posting takes")]


class Order(BaseModel):
    """An order as a caller sees it."""

    order_id: str
    customer: str
    total: float
    refunded: float


class Refund(BaseModel):
    """A refund made."""

    refund_id: str
    order_id: str
    amount: float


class ReportRow(BaseModel):
    """One row of the report."""

    order_id: str
    customer: str
    total: float


class Posted(BaseModel):
    """A journal posting made."""

    account: str
    memo: str
    started: float
    ended: float


def _call_key(context: Context) -> str:
    """What makes a refund or a posting this call's: its principal and idempotency key (shared by retries)."""
    return f"{context.principal}:{context.idempotency_key}"


@tool(name="refunds", side_effect=SideEffectClass.FINANCIAL, risk=RiskTier.LOW, timeout_s=10.0)
class Refunds:
    """Refunds of the ledger's orders."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    @operation(risk=RiskTier.HIGH, amount="/amount", reconcile="refund_status")
    async def refund(self, order_id: OrderId, amount: Amount, context: Context) -> Effect[Refund]:
        """Refund part or all of an order, once per call."""
        order = await self._read(order_id)
        if order.refunded + amount > order.total:
            raise Refusal("refund_exceeds_order", f"{order_id}: {order.refunded} of {order.total} is refunded already")
        try:
            row = await self._ledger.refund(f"rf_{uuid.uuid4().hex[:12]}", order_id, amount, _call_key(context))
        except LedgerError as error:
            raise Fault("ledger_busy", str(error), retryable=True) from error
        return Effect(Refund(refund_id=row.refund_id, order_id=order_id, amount=row.amount), effect_id=row.refund_id)

    @operation(side_effect=SideEffectClass.READ_ONLY, retry=Retry(attempts=3))
    async def refund_status(self, order_id: OrderId, amount: Amount, context: Context) -> Reconciled:
        """Whether this call's refund is in the ledger (the reconcile step of ``refund``)."""
        row = await self._ledger.refund_of(_call_key(context))
        if row is None:
            return Reconciled(resolution="not_run", note=f"the ledger holds no refund of {order_id} for this call")
        return Reconciled(resolution="ran", effect_id=row.refund_id, note=f"refund {row.refund_id} of {row.amount}")

    async def _read(self, order_id: str) -> Order:
        found = await self._ledger.order(order_id)
        if found is None:
            raise Refusal("order_not_found", f"the ledger has no order {order_id}")
        return Order(order_id=found.order_id, customer=found.customer, total=found.total, refunded=found.refunded)


@tool(
    side_effect=SideEffectClass.READ_ONLY,
    risk=RiskTier.LOW,
    retry=Retry(attempts=4, backoff_s=0.3, on=("ledger_busy",)),
)
async def lookup_order(order_id: OrderId, ledger: Provided[Ledger]) -> Order:
    """An order and how much of it was refunded."""
    try:
        found = await ledger.order(order_id, busy_timeout_s=0.1)
    except LedgerError as error:
        raise Fault("ledger_busy", str(error), retryable=True) from error
    if found is None:
        raise Refusal("order_not_found", f"the ledger has no order {order_id}")
    return Order(order_id=found.order_id, customer=found.customer, total=found.total, refunded=found.refunded)


@tool(side_effect=SideEffectClass.READ_ONLY, risk=RiskTier.LOW)
async def export_report(ledger: Provided[Ledger]) -> AsyncIterator[ReportRow]:
    """Every order of the ledger, one row at a time (a row without a customer ends the report as failed)."""
    for order in await ledger.orders():
        if not order.customer:
            raise Fault("corrupt_order", f"order {order.order_id} has no customer")
        yield ReportRow(order_id=order.order_id, customer=order.customer, total=order.total)


@tool(name="journal", side_effect=SideEffectClass.REVERSIBLE_WRITE, risk=RiskTier.LOW)
class Journal:
    """The ledger's journal: one posting on an account at a time."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    @operation(concurrency_safe=False, serialize_by="/account", reconcile="posting_status")
    async def post(self, account: Account, memo: str, context: Context, hold_s: HoldS = 0.0) -> Posted:
        """Post a memo on an account (taking ``hold_s`` seconds, as a slow target would)."""
        try:
            entry = await self._ledger.post(account, memo, hold_s, _call_key(context))
        except LedgerError as error:  # one transaction: a locked ledger wrote nothing
            raise Fault("ledger_busy", str(error), retryable=True) from error
        return Posted(account=entry.account, memo=entry.memo, started=entry.started, ended=entry.ended)

    @operation(side_effect=SideEffectClass.READ_ONLY, retry=Retry(attempts=3))
    async def posting_status(self, account: Account, memo: str, context: Context, hold_s: HoldS = 0.0) -> Reconciled:
        """Whether this call's posting is in the journal (the reconcile step of ``post``)."""
        try:
            entries = await self._ledger.entries_of(_call_key(context))
        except LedgerError as error:
            raise Fault("ledger_busy", str(error), retryable=True) from error
        if not entries:
            return Reconciled(resolution="not_run", note=f"the journal holds no posting on {account} for this call")
        return Reconciled(resolution="ran", note=f"{len(entries)} posting(s) on {account} for this call")


TOOLS = [Refunds, lookup_order, export_report, Journal]
"""What the worker serves: a curated list (docs/reference/tools-api.md says why)."""

DEPENDENCIES = Dependencies().provide(Ledger, Ledger)
"""Each call gets its own :class:`Ledger` on ``$LEDGER_DB``."""
