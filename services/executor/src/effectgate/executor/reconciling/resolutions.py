"""What became of an ``uncertain`` call: its resolutions, the one that holds, and the events that say so.

Pure. A request may have several :class:`~effectgate.contracts.events.UncertainResolved` (the
reconciler's ``unknown``, then an operator's ``ran``): the latest ``ran`` or ``not_run`` holds,
else the latest ``unknown`` (``contracts.events.UncertainResolved``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Literal

from effectgate.contracts.events import ReceiptIssued, Resolution, UncertainResolved
from effectgate.contracts.integrity.canonical import sha256_hex

__all__ = ["SETTLED", "holding", "reconciler_id", "resolved_event", "settled"]

SETTLED: frozenset[Resolution] = frozenset({"ran", "not_run"})
"""The resolutions that settle a call (an ``unknown`` leaves it to the operator)."""


def holding(resolutions: Iterable[UncertainResolved]) -> UncertainResolved | None:
    """The resolution that holds: the last ``ran``/``not_run``, else the last ``unknown``, else ``None``."""
    found = list(resolutions)
    settling = [r for r in found if r.resolution in SETTLED]
    latest = settling or found
    return latest[-1] if latest else None


def settled(resolutions: Iterable[UncertainResolved]) -> UncertainResolved | None:
    """The last ``ran``/``not_run`` resolution, or ``None`` while the call is not settled."""
    found = holding(resolutions)
    return found if found is not None and found.resolution in SETTLED else None


def reconciler_id(receipt: ReceiptIssued) -> str:
    """The reconciler's resolution id of ``receipt``: the same for every delivery of it (its ``Nats-Msg-Id``)."""
    return "rsl_" + sha256_hex({"reconciled": receipt.event_id}).removeprefix("sha256:")[:32]


def resolved_event(
    receipt: ReceiptIssued,
    resolution: Resolution,
    now: datetime,
    event_id: str,
    *,
    resolved_by: Literal["reconciler", "operator"],
    note: str = "",
    effect_id: str | None = None,
    attempts: int = 0,
    operator_signature: str | None = None,
) -> UncertainResolved:
    """The :class:`UncertainResolved` of ``receipt``'s call (unsigned; the bus signs it)."""
    return UncertainResolved(
        event_id=event_id,
        occurred_at=now,
        request_id=receipt.request_id,
        principal=receipt.principal,
        receipt_id=receipt.event_id,
        resolution=resolution,
        resolved_by=resolved_by,
        tool=receipt.tool,
        version=receipt.version,
        operation=receipt.operation,
        idempotency_key=receipt.idempotency_key,
        note=note,
        effect_id=effect_id,
        attempts=attempts,
        operator_signature=operator_signature,
    )
