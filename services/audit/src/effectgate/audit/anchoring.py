"""The chain against the stream it was built from: a rewritten database does not verify.

The hash chain shows an edit only to someone who holds the chain's hashes from before; one who
can write the database can recompute every hash after editing a record.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import msgspec

from effectgate.audit.domain import AuditEntry, AuditRecord
from effectgate.audit.intake import entry_of

__all__ = ["Anchoring", "StreamMessage", "differs"]

StreamMessage = Callable[[int], Awaitable[tuple[str, bytes, str | None] | None]]
"""``stream_message(seq)`` → ``(subject, data, Nats-Msg-Id)`` of that stream message, or ``None`` when gone."""


def differs(record: AuditRecord, subject: str, data: bytes, msg_id: str | None) -> bool:
    """Whether ``record`` is not what the audit derives from the stream message it names."""
    again = entry_of(subject, data, msg_id, record.stream_seq, record.occurred_at)
    recorded = {name: getattr(record, name) for name in AuditEntry.__struct_fields__}
    return msgspec.structs.asdict(again) != recorded


@dataclass
class Anchoring:
    """Compares records with their stream messages, keeping the first few that differ.

    Attributes:
        differing: chain sequences of records that differ from their stream message (first ``keep``).
        differing_count: how many differ.
        unanchored: records whose stream message is gone (expired or deleted).
    """

    stream_message: StreamMessage
    keep: int = 20
    differing: list[int] = field(default_factory=list)
    differing_count: int = 0
    unanchored: int = 0

    async def check(self, records: AsyncIterator[AuditRecord]) -> None:
        """Compare every record of ``records`` with the stream."""
        async for record in records:
            found = await self.stream_message(record.stream_seq)
            if found is None:
                self.unanchored += 1
            elif differs(record, *found):
                self.differing_count += 1
                if len(self.differing) < self.keep:
                    self.differing.append(record.sequence)
