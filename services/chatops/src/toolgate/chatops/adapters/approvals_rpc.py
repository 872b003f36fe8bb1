"""The approvals service, as the chat-ops bot asks it over NATS (replies on the bot's private inbox)."""

from __future__ import annotations

from typing import Any

import msgspec
from nats.aio.client import Client

from toolgate.chatops.domain import ListedApproval
from toolgate.contracts.catalog import Rpc

__all__ = ["NatsApprovals"]

_listing = msgspec.json.Decoder(list[ListedApproval])


class NatsApprovals:
    """:class:`~toolgate.chatops.ports.ApprovalsPort` over one NATS connection.

    Args:
        nc: the bot's connection (its NATS user may answer only as mapped approvers).
        timeout_s: how long to wait for the approvals service, seconds.
    """

    def __init__(self, nc: Client, timeout_s: float = 5.0) -> None:
        self._nc, self._timeout_s = nc, timeout_s

    async def decide(self, approver: str, command: dict[str, Any]) -> dict[str, Any]:
        """See :meth:`~toolgate.chatops.ports.ApprovalsPort.decide`."""
        reply = await self._nc.request(Rpc.approvals_decide(approver), msgspec.json.encode(command), self._timeout_s)
        answer = msgspec.json.decode(reply.data)
        return answer if isinstance(answer, dict) else {"ok": False, "reason_code": "malformed", "reason": "no reply"}

    async def pending(self) -> list[ListedApproval]:
        """See :meth:`~toolgate.chatops.ports.ApprovalsPort.pending`."""
        reply = await self._nc.request(Rpc.APPROVALS_LIST, b"", self._timeout_s)
        try:
            return _listing.decode(reply.data)
        except msgspec.DecodeError as error:
            raise OSError(f"the approvals service did not list approvals: {bytes(reply.data[:200])!r}") from error
