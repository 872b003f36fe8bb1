"""The in-memory twins of the chat-ops ports, for the workflow's tests."""

from __future__ import annotations

from effectgate.chatops.domain import CardRecord

__all__ = ["MemoryCardStore"]


class MemoryCardStore:
    """In-memory :class:`~effectgate.chatops.ports.CardStore` for handler tests."""

    def __init__(self) -> None:
        self.records: dict[str, CardRecord] = {}

    async def get(self, approval_id: str) -> CardRecord | None:
        """See :meth:`~effectgate.chatops.ports.CardStore.get`."""
        return self.records.get(approval_id)

    async def put(self, record: CardRecord) -> None:
        """See :meth:`~effectgate.chatops.ports.CardStore.put`."""
        self.records[record.card.approval_id] = record

    async def approval_of_request(self, request_id: str) -> str | None:
        """See :meth:`~effectgate.chatops.ports.CardStore.approval_of_request`."""
        return next((a for a, r in self.records.items() if request_id in r.card.request_ids), None)

    async def approval_of_message(self, room: str, message_id: str) -> str | None:
        """See :meth:`~effectgate.chatops.ports.CardStore.approval_of_message`."""
        found = (a for a, r in self.records.items() if (r.room, r.message_id) == (room, message_id))
        return next(found, None)
