"""The CLI's requests to the running services (core NATS request/reply).

The approver is the last token of ``tg.approvals.decide.<approver>``; with NATS
permissions an operator's credentials can publish only their own token.
"""

from __future__ import annotations

from typing import Any

import msgspec
import nats
from nats.aio.client import Client

from toolgate.shared.catalog import TOKEN, Rpc

__all__ = ["BusError", "decide", "request"]


class BusError(Exception):
    """A service did not answer, or the request could not be sent."""


async def request(nc: Client, subject: str, body: Any, timeout_s: float = 5.0) -> Any:
    """Send ``body`` as JSON and return the decoded JSON answer.

    Raises:
        BusError: no responder or no answer within ``timeout_s`` seconds.
    """
    try:
        reply = await nc.request(subject, msgspec.json.encode(body), timeout=timeout_s)
    except nats.errors.NoRespondersError:
        raise BusError(f"no service answers on {subject}: is `toolgate up` running?") from None
    except nats.errors.TimeoutError:
        raise BusError(f"no answer on {subject} within {timeout_s}s") from None
    return msgspec.json.decode(reply.data)


async def decide(nc: Client, approver: str, approval_id: str, approve: bool, note: str = "") -> dict[str, Any]:
    """Approve or reject ``approval_id`` as ``approver``.

    Raises:
        ValueError: ``approver`` is not a valid identity token.
        BusError: the approvals service did not answer.
    """
    if not TOKEN.match(approver):
        raise ValueError(f"approver {approver!r} must match {TOKEN.pattern}")
    body = {"approval_id": approval_id, "approve": approve, "note": note}
    answer: dict[str, Any] = await request(nc, Rpc.approvals_decide(approver), body)
    return answer
