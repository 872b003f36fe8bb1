"""The approvals service and the stream, as the chat-ops bot asks them over NATS."""

from __future__ import annotations

from typing import Any

import msgspec
from nats.aio.client import Client
from nats.js import JetStreamContext

from toolgate.shared.bus import next_message
from toolgate.shared.catalog import Rpc, Subjects
from toolgate.shared.events import ApprovalRequested, decode_untrusted

__all__ = ["NatsApprovals"]

_requested = msgspec.json.Decoder(ApprovalRequested)


class NatsApprovals:
    """:class:`~toolgate.chatops.ports.ApprovalsPort` over one NATS connection.

    Args:
        nc: the bot's connection (its NATS user may answer only as mapped approvers).
        js: its JetStream context.
        timeout_s: how long to wait for the approvals service, seconds.
    """

    def __init__(self, nc: Client, js: JetStreamContext, timeout_s: float = 5.0) -> None:
        self._nc, self._js, self._timeout_s = nc, js, timeout_s

    async def decide(self, approver: str, command: dict[str, Any]) -> dict[str, Any]:
        """See :meth:`~toolgate.chatops.ports.ApprovalsPort.decide`."""
        reply = await self._nc.request(Rpc.approvals_decide(approver), msgspec.json.encode(command), self._timeout_s)
        answer = msgspec.json.decode(reply.data)
        return answer if isinstance(answer, dict) else {"ok": False, "reason_code": "malformed", "reason": "no reply"}

    async def pending(self) -> list[tuple[str, str, str]]:
        """See :meth:`~toolgate.chatops.ports.ApprovalsPort.pending`."""
        reply = await self._nc.request(Rpc.APPROVALS_LIST, b"", self._timeout_s)
        listed = msgspec.json.decode(reply.data)
        if not isinstance(listed, list):
            raise OSError(f"the approvals service could not list approvals: {listed!r}"[:200])
        return [(item["approval_id"], item["principal"], item["request_id"]) for item in listed]

    async def requested(self, principal: str, request_id: str) -> ApprovalRequested | None:
        """See :meth:`~toolgate.chatops.ports.ApprovalsPort.requested`."""
        message = await next_message(self._js, Subjects.approval("requested", principal, request_id))
        if message is None:
            return None
        try:
            return decode_untrusted(_requested, message.data or b"")
        except msgspec.DecodeError:
            return None
