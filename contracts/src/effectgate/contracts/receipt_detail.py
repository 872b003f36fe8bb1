"""The parts of a receipt kept out of band when the receipt would not fit in one bus message.

A receipt is one NATS message, so it has a size limit (the server's ``max_payload``).
"""

from __future__ import annotations

import msgspec

from effectgate.contracts.events import ReceiptIssued

__all__ = ["REASON_CHARS", "ReceiptDetail", "collapsed", "cut_reason", "with_detail"]

REASON_CHARS = 1_000
"""Characters of a reason a receipt carries when the whole reason is kept out of band."""


class ReceiptDetail(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole parts of a receipt that did not fit in it (``None``: that part was not cut).

    Attributes:
        reason: the whole reason.
        redactions: the whole list of RFC 6901 pointers of what was redacted.
    """

    reason: str | None = None
    redactions: tuple[str, ...] | None = None


def cut_reason(reason: str, chars: int = REASON_CHARS) -> str:
    """``reason`` cut to ``chars`` characters, with a marker naming its whole length and where it is kept."""
    if len(reason) <= chars:
        return reason
    return f"{reason[:chars]}… [reason cut at {chars} of {len(reason)} characters; kept whole with detail_ref]"


def collapsed(redactions: tuple[str, ...]) -> tuple[str, ...]:
    """The top-level members ``redactions`` point into (``/reason``, ``/result``), in first-seen order."""
    return tuple(dict.fromkeys("/" + pointer.split("/")[1] for pointer in redactions if pointer.startswith("/")))


def with_detail(receipt: ReceiptIssued, detail: ReceiptDetail) -> ReceiptIssued:
    """``receipt`` with the whole parts ``detail`` kept (its cut reason and collapsed redactions replaced)."""
    return msgspec.structs.replace(
        receipt,
        reason=detail.reason if detail.reason is not None else receipt.reason,
        redactions=detail.redactions if detail.redactions is not None else receipt.redactions,
    )
