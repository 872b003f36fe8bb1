"""Receipts the SDK makes itself, for a request the gateway never saw.

Such a receipt is not signed (the executor signs every receipt it issues): it says why
nothing was sent, in the same terms as the gateway's own refusal of the same request.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import msgspec

from effectgate.contracts.events import ReceiptIssued, ToolRequested
from effectgate.contracts.vocabulary import Outcome

__all__ = ["oversized_receipt"]


def oversized_receipt(request: ToolRequested, principal: str, limit_bytes: int) -> ReceiptIssued:
    """The ``refused``/``oversized`` receipt of ``request``, larger than the bus's ``limit_bytes``.

    The policy refuses a request over its own limit with the same outcome and reason code.
    """
    size_bytes = len(msgspec.json.encode(request))
    return ReceiptIssued(
        event_id=uuid.uuid4().hex,
        occurred_at=datetime.now(UTC),
        request_id=request.request_id,
        principal=principal,
        outcome=Outcome.REFUSED,
        reason_code="oversized",
        reason=f"request is {size_bytes} bytes; the bus limit (NATS max_payload) is {limit_bytes}: it was not sent",
        tool=request.tool,
        version=request.version,
        operation=request.operation,
        idempotency_key=request.idempotency_key,
    )
