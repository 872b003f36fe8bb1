"""The approval a request waited on, named in its receipt (``ReceiptIssued.approval_id``).

The executor ends a request that needed approval from a signed grant or rejection, or the
backstop ends one whose approval was never answered; the receipt issued meanwhile names that
approval: the request's own, or the one it joined (same principal, idempotency key and
arguments), whose id the agent could not derive.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import msgspec

from effectgate.contracts.events import ReceiptIssued

__all__ = ["stamped", "waiting_on"]

_WAITING: ContextVar[tuple[str, str, str] | None] = ContextVar("effectgate_executor_waiting_on", default=None)


@contextlib.contextmanager
def waiting_on(principal: str, request_id: str, approval_id: str | None) -> Iterator[None]:
    """While handling ``principal``'s ``request_id``, its receipt names ``approval_id`` (``None``: none)."""
    token = _WAITING.set(None if approval_id is None else (principal, request_id, approval_id))
    try:
        yield
    finally:
        _WAITING.reset(token)


def stamped(receipt: ReceiptIssued) -> ReceiptIssued:
    """``receipt`` naming the approval its request waited on, when one is being handled; else as given.

    A receipt that already names one (stored before, republished) and a receipt of another
    request are left as they are.
    """
    current = _WAITING.get()
    if current is None or receipt.approval_id is not None or (receipt.principal, receipt.request_id) != current[:2]:
        return receipt
    return msgspec.structs.replace(receipt, approval_id=current[2])
