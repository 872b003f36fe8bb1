"""The approvals service, as the chat-ops bot asks it over NATS (replies on the bot's private inbox)."""

from __future__ import annotations

from typing import Any

import msgspec
from nats.aio.client import Client

from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.rpc.approvals import ApprovalShown, ApprovalsPage, PendingApproval

__all__ = ["NatsApprovals"]

MAX_PAGES = 1000
"""Most pages read for one listing (each holds up to 100 approvals)."""

_page = msgspec.json.Decoder(ApprovalsPage[PendingApproval])
_shown = msgspec.json.Decoder(ApprovalShown[PendingApproval])


class NatsApprovals:
    """:class:`~effectgate.chatops.ports.ApprovalsPort` over one NATS connection.

    Args:
        nc: the bot's connection (its NATS user may answer only as mapped approvers).
        timeout_s: how long to wait for the approvals service, seconds.
    """

    def __init__(self, nc: Client, timeout_s: float = 5.0) -> None:
        self._nc, self._timeout_s = nc, timeout_s

    async def decide(self, approver: str, command: dict[str, Any]) -> dict[str, Any]:
        """See :meth:`~effectgate.chatops.ports.ApprovalsPort.decide`."""
        reply = await self._nc.request(Rpc.approvals_decide(approver), msgspec.json.encode(command), self._timeout_s)
        answer = msgspec.json.decode(reply.data)
        return answer if isinstance(answer, dict) else {"ok": False, "reason_code": "malformed", "reason": "no reply"}

    async def pending(self) -> list[PendingApproval]:
        """See :meth:`~effectgate.chatops.ports.ApprovalsPort.pending`.

        Every page of ``tg.approvals.list``; an approval whose arguments a page left out is
        read whole with ``tg.approvals.show``.
        """
        found: list[PendingApproval] = []
        after: str | None = None
        for _ in range(MAX_PAGES):
            page = await self._ask(Rpc.APPROVALS_LIST, {"after": after}, _page)
            found += [await self._whole(item) if item.omitted else item for item in page.approvals]
            if (after := page.next) is None:
                return found
        raise OSError(f"the approvals service listed more than {MAX_PAGES} pages")

    async def _whole(self, item: PendingApproval) -> PendingApproval:
        shown = await self._ask(Rpc.APPROVALS_SHOW, {"approval_id": item.approval_id}, _shown, refused_ok=True)
        return shown.approval if shown.ok and shown.approval is not None else item

    async def _ask(self, subject: str, body: dict[str, Any], decoder: Any, *, refused_ok: bool = False) -> Any:
        reply = await self._nc.request(subject, msgspec.json.encode(body), self._timeout_s)
        try:
            answer = decoder.decode(reply.data)
        except msgspec.DecodeError as error:
            raise OSError(f"the approvals service did not answer on {subject}: {bytes(reply.data[:200])!r}") from error
        if not answer.ok and not refused_ok:
            raise OSError(f"the approvals service refused {subject}: {answer.reason_code}: {answer.reason}")
        return answer
