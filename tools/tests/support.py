"""Building calls of a toolbox's tools as the executor sends them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from effectgate.contracts.tools.descriptors import descriptor_digest
from effectgate.contracts.tools.hosting import CallContext, WorkerCall
from effectgate.tools import Toolbox


def call_of(
    box: Toolbox, tool: str, operation: str | None = None, deadline_s: float = 5.0, **arguments: Any
) -> WorkerCall:
    """A call of ``tool``'s ``operation`` (default: the tool's only one) binding its current descriptor."""
    descriptor = next(d for d in box.descriptors() if d.name == tool)
    context = CallContext(
        principal="alice", request_id="req-1", idempotency_key="key-1",
        deadline=datetime.now(UTC) + timedelta(seconds=deadline_s), approval_id="apr-1", approvers=("bob",),
        policy_version="p7", traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )  # fmt: skip
    return WorkerCall(
        call_id="call-1", tool=tool, version=descriptor.version, descriptor_digest=descriptor_digest(descriptor),
        operation=operation or next(iter(descriptor.operations)), arguments=arguments, context=context,
    )  # fmt: skip


class Progress:
    """Records ``(items, message)`` reports."""

    def __init__(self) -> None:
        self.reports: list[tuple[int, str]] = []

    async def __call__(self, items: int, message: str) -> None:
        self.reports.append((items, message))
