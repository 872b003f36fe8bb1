"""The audit service's queries over its store: a request's trail and the full check."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from toolgate.audit.adapters.sqlite import SqliteAuditStore
from toolgate.audit.queries import EXPORT_PAGE, ExportQuery, ExportReply, TrailReply, VerifyReply
from toolgate.audit.signatures import SignatureCheck

__all__ = ["Audit"]


@dataclass
class Audit:
    """The store, how to ask the stream for its last sequence, and the public keys signatures verify under."""

    store: SqliteAuditStore
    stream_last_seq: Callable[[], Awaitable[int | None]]
    keys: Mapping[str, Ed25519PublicKey] = field(default_factory=dict)

    async def trail(self, request_id: str) -> TrailReply:
        """Every record of one request, in bus order."""
        records = await self.store.trail(request_id)
        return TrailReply(ok=True, reason=f"{len(records)} records", records=records)

    async def verify(self) -> VerifyReply:
        """Check the chain's links and signatures, that no stream event is missing, and the bus's order."""
        signatures = SignatureCheck(self.keys)
        result = await self.store.verify(signatures)
        missing, audited_last = await self.store.coverage()
        disordered = await self.store.out_of_order()
        return VerifyReply(
            ok=result.ok and not missing and not disordered and not signatures.count,
            bad_signatures=signatures.faults,
            bad_signature_count=signatures.count,
            result=result,
            total=await self.store.count(),
            missing_stream_seqs=missing,
            out_of_stream_order=disordered,
            audited_last_seq=audited_last,
            stream_last_seq=await self.stream_last_seq(),
        )

    async def export(self, query: ExportQuery) -> ExportReply:
        """One page of the chain (``1 <= limit <= EXPORT_PAGE``), for ``toolgate audit export``."""
        if not 1 <= query.limit <= EXPORT_PAGE or query.after < 0:
            return ExportReply(ok=False, reason=f"limit must be 1..{EXPORT_PAGE} and after >= 0")
        records = await self.store.page(query.after, query.limit)
        return ExportReply(ok=True, reason=f"{len(records)} records", records=records)
