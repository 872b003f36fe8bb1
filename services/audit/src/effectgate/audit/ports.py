"""The audit service's ports: the chain's store (SQLite in :mod:`effectgate.audit.adapters.sqlite`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from effectgate.audit.domain import AuditEntry, AuditRecord, VerifyResult
from effectgate.audit.signatures import SignatureCheck

__all__ = ["AuditStore", "Writer"]

Writer = tuple[int, str]
"""A leased writer: its fencing token and its holder id (:mod:`effectgate.shared.runtime.leadership`)."""


class AuditStore(Protocol):
    """The hash chain: appended in stream order, read by request, page or kind, verified whole.

    Every read and append raises :class:`~effectgate.audit.errors.StoreError` when the
    store is closed or the operation failed.
    """

    @property
    def top_stream_seq(self) -> int | None:
        """The highest stream sequence in the chain (``None``: empty), as of the last append."""
        ...

    async def append_batch(
        self, entries: Sequence[AuditEntry], writer: Writer | None = None
    ) -> list[AuditRecord | None]:
        """Append ``entries`` in order, in one transaction; ``None`` for each already stored (a redelivery).

        Raises:
            effectgate.audit.errors.Fenced: ``writer``'s token is below one the chain recorded.
        """
        ...

    async def take_over(self, writer: Writer) -> None:
        """Record ``writer``'s token: no writer with a lower one appends from now on (raises ``Fenced`` if lower)."""
        ...

    async def last_stream_seq(self) -> int | None:
        """The highest stream sequence stored now (``None``: empty), whoever appended it."""
        ...

    async def first_stream_seq(self) -> int | None:
        """The lowest stream sequence stored (``None``: empty)."""
        ...

    async def trail(self, request_id: str) -> list[AuditRecord]:
        """Every record of one tool request, in bus order."""
        ...

    async def security_records(self, limit: int) -> list[AuditRecord]:
        """The ``limit`` most recent security events (``tg.security.*``), newest first."""
        ...

    async def requests(
        self, principal: str | None, since: str | None, limit: int
    ) -> list[tuple[AuditRecord, list[AuditRecord]]]:
        """The ``limit`` most recent requests of ``principal`` (``None``: all) since an ISO 8601 UTC text, newest first.

        Each comes with its decisions and receipts.
        """
        ...

    async def verify(self, signatures: SignatureCheck | None = None) -> VerifyResult:
        """Check the whole chain's links; ``signatures`` (if any) sees each record."""
        ...

    async def page(self, after: int, limit: int) -> list[AuditRecord]:
        """Up to ``limit`` records with a chain sequence above ``after``, in chain order."""
        ...

    async def coverage(self, limit: int = 20) -> tuple[list[int], int | None]:
        """``(missing, last)``: up to ``limit`` stream sequences missing from the chain, and the highest audited."""
        ...

    async def out_of_order(self, limit: int = 20) -> list[int]:
        """Chain positions whose stream sequence is below the previous record's (first ``limit``)."""
        ...

    async def count(self) -> int:
        """How many records the chain holds."""
        ...

    async def close(self) -> None:
        """Close the store; later calls raise. Idempotent."""
        ...
