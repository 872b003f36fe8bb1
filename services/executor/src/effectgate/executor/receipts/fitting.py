"""Every receipt fits in one bus message, whatever grew in it (guarantee 2: exactly one receipt)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from effectgate.contracts.events import ReceiptIssued, ResultRef
from effectgate.contracts.receipt_detail import REASON_CHARS, ReceiptDetail, collapsed, cut_reason

__all__ = ["LAST_RESORT_REASON_CHARS", "MAX_POINTERS", "MIN_LIMIT_BYTES", "Keep", "fit", "last_resort", "size_bytes"]

log = logging.getLogger("effectgate.executor")

Keep = Callable[[bytes], Awaitable[ResultRef]]
"""Keeps JSON bytes out of band for the receipt's request and says where (``Bus.store_result``)."""

MAX_POINTERS = 64
"""A redactions list longer than this (pointers) is kept whole out of band when the receipt does not fit."""

LAST_RESORT_REASON_CHARS = 300
"""Characters of the reason the last resort keeps."""

MIN_LIMIT_BYTES = 8_192
"""Smallest receipt limit (bytes) under which the last resort is proven to fit (``tests``)."""

_CODE_CHARS = 64
_NAME_CHARS = 256


def size_bytes(receipt: ReceiptIssued) -> int:
    """Length of the receipt's JSON as the bus would carry it (before its signature), bytes."""
    return len(msgspec.json.encode(receipt))


async def fit(receipt: ReceiptIssued, limit_bytes: int, keep: Keep) -> ReceiptIssued:
    """``receipt`` within ``limit_bytes`` of JSON, its large parts kept out of band (module doc).

    Never raises for the receipt's size or for a store that fails: the last resort fits.
    """
    if size_bytes(receipt) <= limit_bytes:
        return receipt
    for step in (_detail_kept, _result_kept):
        receipt = await step(receipt, keep)
        if size_bytes(receipt) <= limit_bytes:
            return receipt
    log.error(
        "ALARM receipt of %s: over %d bytes even out of band; its bounded parts only", receipt.request_id, limit_bytes
    )
    return last_resort(receipt)


async def _detail_kept(receipt: ReceiptIssued, keep: Keep) -> ReceiptIssued:
    """A long reason and a long redactions list kept whole out of band (``detail_ref``); else as it is."""
    long_reason = len(receipt.reason) > REASON_CHARS
    many = receipt.redactions is not None and len(receipt.redactions) > MAX_POINTERS
    if receipt.detail_ref is not None or not (long_reason or many):
        return receipt
    detail = ReceiptDetail(
        reason=receipt.reason if long_reason else None, redactions=receipt.redactions if many else None
    )
    ref = await _kept(receipt, keep, detail, "its reason and redactions")
    if ref is None:
        return receipt
    return msgspec.structs.replace(
        receipt,
        reason=cut_reason(receipt.reason),
        redactions=collapsed(receipt.redactions or ()) if many else receipt.redactions,
        detail_ref=ref,
    )


async def _result_kept(receipt: ReceiptIssued, keep: Keep) -> ReceiptIssued:
    """An inline result kept out of band (``result_ref``), as the runner keeps a large one; else as it is."""
    if receipt.result is None:
        return receipt
    ref = await _kept(receipt, keep, receipt.result, "its result")
    return receipt if ref is None else msgspec.structs.replace(receipt, result=None, result_ref=ref)


async def _kept(receipt: ReceiptIssued, keep: Keep, value: Any, what: str) -> ResultRef | None:
    try:
        return await keep(msgspec.json.encode(value))
    except Exception:  # the receipt must still be issued: the next step, or the last resort
        log.exception("receipt of %s: %s could not be kept out of band", receipt.request_id, what)
        return None


def last_resort(receipt: ReceiptIssued) -> ReceiptIssued:
    """``receipt`` with only bounded parts (module doc, step 4): it fits any limit of :data:`MIN_LIMIT_BYTES`."""
    lost = ["its result"] if receipt.result is not None else []
    if len(receipt.reason) > LAST_RESORT_REASON_CHARS:
        lost.append("the rest of its reason" + (" (kept whole with detail_ref)" if receipt.detail_ref else ""))
    note = f" [receipt cut to fit one bus message; not in it: {' and '.join(lost)}]" if lost else ""
    return msgspec.structs.replace(
        receipt,
        reason=receipt.reason[:LAST_RESORT_REASON_CHARS] + note,
        reason_code=receipt.reason_code[:_CODE_CHARS],
        result=None,
        redactions=collapsed(receipt.redactions) if receipt.redactions is not None else None,
        **{name: _cut(getattr(receipt, name)) for name in ("tool", "version", "operation", "idempotency_key")},
    )


def _cut(value: str | None) -> str | None:
    """A name of the call within :data:`_NAME_CHARS` (each is bounded where it enters; this keeps the proof local)."""
    return value[:_NAME_CHARS] if value is not None else None
