"""Rebuilding pending approvals from the stream after Redis lost them.

The stream is the record: every opened approval is an ``ApprovalRequested`` event, and
every answer a grant or rejection event (then a receipt). When the store has no epoch
marker, one approvals instance takes the rebuild lock, re-opens every requested approval
that has neither an answer nor a receipt — with its original expiry, so one already past
it is expired by the next sweep and its request ends ``denied`` — and then sets the epoch.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from toolgate.approvals.domain import PendingApproval
from toolgate.approvals.ports import ApprovalsBus, ApprovalStore
from toolgate.shared.events import ApprovalRequested
from toolgate.shared.rebuilding import rebuild

__all__ = ["Rebuilder", "rebuild_approvals"]

log = logging.getLogger("toolgate.approvals")


async def rebuild_approvals(store: ApprovalStore, bus: ApprovalsBus, owner: str) -> bool:
    """Rebuild if the epoch is missing; True when the store is complete afterwards.

    Raises:
        ApprovalsError: the store cannot be reached.
        nats.errors.Error: the stream cannot be read.
    """

    async def reopen(event: ApprovalRequested) -> int:
        return await _reopen(store, bus, event)

    return await rebuild(store, bus.requested(), reopen, owner, "approval store")


async def _reopen(store: ApprovalStore, bus: ApprovalsBus, event: ApprovalRequested) -> int:
    """Re-open one requested approval that has no answer and no receipt; 1 when re-opened."""
    if await bus.resolved(event.principal, event.request_id):
        return 0
    pending = PendingApproval(
        approval_id=event.approval_id,
        request_id=event.request_id,
        principal=event.principal,
        request_hash=event.request_hash,
        approver_role=event.approver_role,
        expires_at=event.expires_at,
        request=event.request,
        version_pinned=event.version_pinned,
    )
    await store.restore(pending)
    return 1


class Rebuilder:
    """Runs :func:`rebuild_approvals` in the background, one at a time, until it succeeds."""

    def __init__(self, store: ApprovalStore, bus: ApprovalsBus) -> None:
        self._store, self._bus, self._owner = store, bus, uuid.uuid4().hex
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Rebuild now unless a rebuild is already running."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._until_done(), name="approvals-rebuild")

    async def stop(self) -> None:
        """Cancel a running rebuild."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _until_done(self) -> None:
        while True:
            try:
                if await rebuild_approvals(self._store, self._bus, self._owner):
                    return
            except Exception as error:  # the store or the stream is not reachable yet: keep trying, loudly
                log.warning("approval store rebuild not possible yet: %s: %s", type(error).__name__, error)
            await asyncio.sleep(1.0)
