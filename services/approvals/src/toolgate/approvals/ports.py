"""Ports of the approvals service, with in-memory twins for unit tests.

- :class:`ApprovalStore`: pending approvals (Redis). It is an index over the stream: the
  stream keeps every ``ApprovalRequested`` and every grant or rejection, so a store that
  lost its state (its epoch marker is missing) answers :class:`IndexLost` until it has
  been rebuilt from the stream (:mod:`toolgate.approvals.rebuild`).
- :class:`ApprovalsBus`: what the service reads from the stream, and the policy re-check.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import msgspec

from toolgate.approvals.domain import ApprovalState, PendingApproval
from toolgate.approvals.errors import IndexLost
from toolgate.shared.events import ApprovalRequested
from toolgate.shared.rebuilding import MemoryEpoch
from toolgate.shared.recheck import RecheckAnswer, RecheckQuery

__all__ = ["ApprovalStore", "ApprovalsBus", "InMemoryApprovalStore", "InMemoryApprovalsBus"]


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

    async def resolve(self, approval_id: str, state: ApprovalState, token: str) -> bool:
        """Atomically move ``pending`` to ``state``; ``False`` if it was not pending.

        Resolving again with the same ``token`` (a retried call) answers ``True`` again.
        """
        ...

    async def due(self, now: datetime) -> list[str]:
        """Return ids of pending approvals whose expiry is at or before ``now``."""
        ...

    async def restore(self, pending: PendingApproval) -> None:
        """Re-open an approval rebuilt from the stream (no epoch check)."""
        ...

    async def has_epoch(self) -> bool:
        """Whether the store is complete (its epoch marker exists)."""
        ...

    async def set_epoch(self, epoch: str) -> None:
        """Mark the store complete."""
        ...

    async def lock_rebuild(self, owner: str, ttl_s: float) -> bool:
        """Take the rebuild lock for ``ttl_s`` seconds; ``False`` when another owner holds it."""
        ...

    async def renew_rebuild(self, owner: str, ttl_s: float) -> bool:
        """Renew ``owner``'s rebuild lock; ``False`` when it no longer holds it (start over)."""
        ...

    async def finish_rebuild(self, owner: str, epoch: str) -> bool:
        """Mark the store complete if ``owner`` still holds the rebuild lock; ``False``: start over."""
        ...


class ApprovalsBus(Protocol):
    """The stream as the approvals service reads it, and the policy re-check."""

    async def has_receipt(self, principal: str, request_id: str) -> bool:
        """Whether the request already ended."""
        ...

    async def resolved(self, principal: str, request_id: str) -> bool:
        """Whether the request has a grant, a rejection or a receipt in the stream."""
        ...

    def requested(self) -> AsyncIterator[ApprovalRequested]:
        """Every approval-requested event, oldest first."""
        ...

    async def recheck(self, query: RecheckQuery) -> RecheckAnswer | None:
        """Ask the policy service whether the call may still run; ``None`` without an answer."""
        ...


class InMemoryApprovalStore(MemoryEpoch):
    """:class:`ApprovalStore` in a dict."""

    def __init__(self) -> None:
        super().__init__()
        self._items: dict[str, PendingApproval] = {}
        self._tokens: dict[str, str] = {}

    async def open(self, pending: PendingApproval) -> bool:  # noqa: D102
        self._check()
        if pending.approval_id in self._items:
            return False
        self._items[pending.approval_id] = pending
        return True

    async def get(self, approval_id: str) -> PendingApproval | None:  # noqa: D102
        self._check()
        return self._items.get(approval_id)

    async def list_pending(self) -> list[PendingApproval]:  # noqa: D102
        self._check()
        pending = [p for p in self._items.values() if p.state is ApprovalState.PENDING]
        return sorted(pending, key=lambda p: p.expires_at)

    async def resolve(self, approval_id: str, state: ApprovalState, token: str) -> bool:  # noqa: D102
        self._check()
        item = self._items.get(approval_id)
        if item is not None and item.state is state and self._tokens.get(approval_id) == token:
            return True
        if item is None or item.state is not ApprovalState.PENDING:
            return False
        self._items[approval_id] = msgspec.structs.replace(item, state=state)
        self._tokens[approval_id] = token
        return True

    async def due(self, now: datetime) -> list[str]:  # noqa: D102
        return [p.approval_id for p in await self.list_pending() if p.expires_at <= now]

    async def restore(self, pending: PendingApproval) -> None:  # noqa: D102
        self._items.setdefault(pending.approval_id, pending)

    def lose_everything(self) -> None:
        """Forget every approval and the epoch, as a Redis restarted empty would."""
        self._items.clear()
        self.forget_epoch()

    def _check(self) -> None:
        if self.epoch is None:
            raise IndexLost()


@dataclass
class InMemoryApprovalsBus:
    """:class:`ApprovalsBus` over lists; ``answer`` decides re-checks."""

    receipts: set[str] = field(default_factory=set)
    outcomes: set[str] = field(default_factory=set)
    requests: list[ApprovalRequested] = field(default_factory=list)
    answer: Callable[[RecheckQuery], RecheckAnswer | None] | None = None

    async def has_receipt(self, principal: str, request_id: str) -> bool:  # noqa: D102
        return request_id in self.receipts

    async def resolved(self, principal: str, request_id: str) -> bool:  # noqa: D102
        return request_id in self.receipts or request_id in self.outcomes

    async def requested(self) -> AsyncIterator[ApprovalRequested]:  # noqa: D102
        for event in list(self.requests):
            yield event

    async def recheck(self, query: RecheckQuery) -> RecheckAnswer | None:  # noqa: D102
        return self.answer(query) if self.answer else None
