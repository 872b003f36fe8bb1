"""The audit service's queries over its store: a request's trail and the full check."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from toolgate.audit.adapters.sqlite import SqliteAuditStore
from toolgate.audit.queries import TrailReply, VerifyReply

__all__ = ["Audit"]


@dataclass
class Audit:
    """The store, and how to ask the stream for its last sequence."""

    store: SqliteAuditStore
    stream_last_seq: Callable[[], Awaitable[int | None]]

    async def trail(self, request_id: str) -> TrailReply:
        """Every record of one request, in bus order."""
        records = await self.store.trail(request_id)
        return TrailReply(ok=True, reason=f"{len(records)} records", records=records)

    async def verify(self) -> VerifyReply:
        """Check the chain's links, that no stream event is missing from it, and that it follows the bus's order."""
        result = await self.store.verify()
        missing, audited_last = await self.store.coverage()
        disordered = await self.store.out_of_order()
        return VerifyReply(
            ok=result.ok and not missing and not disordered,
            result=result,
            total=await self.store.count(),
            missing_stream_seqs=missing,
            out_of_stream_order=disordered,
            audited_last_seq=audited_last,
            stream_last_seq=await self.stream_last_seq(),
        )
