"""What the spend ledger's rebuild reads from the stream: decisions, grants and receipts.

:class:`SpendTrail` is the port (``adapters.stream.StreamSpendTrail`` reads JetStream);
:class:`InMemorySpendTrail` its twin over lists.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from toolgate.contracts.events import ApprovalGranted, DecisionMade, ReceiptIssued

__all__ = ["InMemorySpendTrail", "SpendTrail"]


class SpendTrail(Protocol):
    """What the stream says about admitted calls (the rebuild reads it; adapter: ``adapters.stream``).

    Each event counts only when it is signed by its service's key and names the request
    its subject names; of a per-request subject only the first such event counts.
    """

    def decisions(self) -> AsyncIterator[DecisionMade]:
        """Every decision signed by the policy key, oldest first."""
        ...

    async def grant(self, principal: str, request_id: str) -> ApprovalGranted | None:
        """The request's grant signed by the approvals key, or ``None``."""
        ...

    async def receipt(self, principal: str, request_id: str) -> ReceiptIssued | None:
        """The request's receipt signed by the executor's receipts key, or ``None``."""
        ...


@dataclass
class InMemorySpendTrail:
    """:class:`SpendTrail` over lists of events (taken as verified)."""

    decided: list[DecisionMade] = field(default_factory=list)
    grants: list[ApprovalGranted] = field(default_factory=list)
    receipts: list[ReceiptIssued] = field(default_factory=list)

    async def decisions(self) -> AsyncIterator[DecisionMade]:
        """Every decision, in list order."""
        for decision in self.decided:
            yield decision

    async def grant(self, principal: str, request_id: str) -> ApprovalGranted | None:
        """The first grant of the request."""
        return next((g for g in self.grants if (g.principal, g.request_id) == (principal, request_id)), None)

    async def receipt(self, principal: str, request_id: str) -> ReceiptIssued | None:
        """The first receipt of the request."""
        return next((r for r in self.receipts if (r.principal, r.request_id) == (principal, request_id)), None)
