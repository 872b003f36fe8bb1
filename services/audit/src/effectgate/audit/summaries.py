"""What ``tg.audit.requests`` says about one request: its call, decision and receipt, from its records.

Pure: the store selects the records (:mod:`effectgate.audit.adapters.sqlite`), this module reads
their payloads. A payload that is not the JSON object it should be adds nothing (the record
is in the chain as received; a summary is a view of it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from effectgate.audit.domain import AuditRecord
from effectgate.contracts.rpc.audit import RequestSummary

__all__ = ["DECIDED", "RECEIPTED", "REQUESTED", "summarize"]

REQUESTED = "tool.requested"
DECIDED = "decision.made"
RECEIPTED = "receipt.issued"


def _fields(record: AuditRecord) -> dict[str, Any]:
    try:
        body = json.loads(record.payload)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _text(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    return value if isinstance(value, str) else None


def summarize(request: AuditRecord, later: Iterable[AuditRecord]) -> RequestSummary:
    """The summary of ``request`` (a ``tool.requested`` record) given its later records.

    Args:
        request: the request's record.
        later: records of the same request id (any order); the last decision and the
            receipt are read, anything else is ignored.
    """
    asked = _fields(request)
    decision: dict[str, Any] = {}
    receipt: dict[str, Any] = {}
    for record in sorted(later, key=lambda r: r.sequence):
        if record.event_type == DECIDED:
            decision = _fields(record)
        elif record.event_type == RECEIPTED:
            receipt = receipt or _fields(record)
    why = receipt or decision
    return RequestSummary(
        request_id=request.request_id or "",
        principal=request.principal,
        requested_at=request.occurred_at,
        tool=_text(asked, "tool"),
        version=_text(receipt, "version") or _text(asked, "version"),
        operation=_text(asked, "operation"),
        verdict=_text(decision, "verdict"),
        outcome=_text(receipt, "outcome"),
        reason_code=_text(why, "reason_code"),
        reason=_text(why, "reason"),
    )
