"""Storage port of the approvals service, with an in-memory twin for unit tests."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

import msgspec

from toolgate.approvals.domain import ApprovalState, PendingApproval

__all__ = ["ApprovalStore", "InMemoryApprovalStore"]


class ApprovalStore(Protocol):
    """Pending approvals; every transition out of ``pending`` happens at most once."""

    async def open(self, pending: PendingApproval) -> bool:
        """Store a new pending approval; ``False`` if that id exists already."""
        ...

    async def get(self, approval_id: str) -> PendingApproval | None:
        """Return the approval, or ``None``."""
        ...

    async def list_pending(self) -> list[PendingApproval]:
        """Return approvals still pending, soonest expiry first."""
        ...

    async def resolve(self, approval_id: str, state: ApprovalState) -> bool:
        """Atomically move ``pending`` to ``state``; ``False`` if it was not pending."""
        ...

    async def due(self, now: datetime) -> list[str]:
        """Return ids of pending approvals whose expiry is at or before ``now``."""
        ...


class InMemoryApprovalStore:
    """:class:`ApprovalStore` in a dict."""

    def __init__(self) -> None:
        self._items: dict[str, PendingApproval] = {}

    async def open(self, pending: PendingApproval) -> bool:  # noqa: D102
        if pending.approval_id in self._items:
            return False
        self._items[pending.approval_id] = pending
        return True

    async def get(self, approval_id: str) -> PendingApproval | None:  # noqa: D102
        return self._items.get(approval_id)

    async def list_pending(self) -> list[PendingApproval]:  # noqa: D102
        pending = [p for p in self._items.values() if p.state is ApprovalState.PENDING]
        return sorted(pending, key=lambda p: p.expires_at)

    async def resolve(self, approval_id: str, state: ApprovalState) -> bool:  # noqa: D102
        item = self._items.get(approval_id)
        if item is None or item.state is not ApprovalState.PENDING:
            return False
        self._items[approval_id] = msgspec.structs.replace(item, state=state)
        return True

    async def due(self, now: datetime) -> list[str]:  # noqa: D102
        return [p.approval_id for p in await self.list_pending() if p.expires_at <= now]
