"""The MCP surface's ports: the principals' SDK connections, the calls ledger, the cancellation relay.

Their adapters (:mod:`effectgate.surface.adapters`) are built by :mod:`effectgate.surface.app`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from effectgate.sdk import ToolClient
from effectgate.surface.calls import CallEntry
from effectgate.surface.cancels import Cancels

__all__ = ["AgentClients", "CallLedger", "CancelRelaying"]


class AgentClients(Protocol):
    """One connected SDK client per principal (:class:`~effectgate.surface.adapters.agents.Agents`)."""

    async def client(self, principal: str) -> ToolClient:
        """The connected client of ``principal``.

        Raises:
            effectgate.surface.errors.NotServed: no credentials for the principal.
            effectgate.sdk.BusUnreachable / PermissionError: the connection failed.
        """
        ...


class CallLedger(Protocol):
    """The MCP calls every replica shares, compare-and-set (:class:`~effectgate.surface.adapters.ledger.Ledger`)."""

    async def claim(self, key: str, fresh: CallEntry, reuse: Callable[[CallEntry], bool]) -> tuple[CallEntry, bool]:
        """The entry a call belongs to: the stored one when ``reuse`` accepts it, else ``fresh`` (stored).

        Returns ``(entry, new)``: ``new`` is true when ``fresh`` was stored (the call must be sent).
        """
        ...

    async def put(self, key: str, entry: CallEntry) -> None:
        """Store ``entry`` under ``key`` (its call's latest state)."""
        ...


class CancelRelaying(Protocol):
    """Cancellations of calls in flight, relayed to every replica (:mod:`effectgate.surface.adapters.cancel_relay`)."""

    cancels: Cancels
    """The calls in flight on this replica."""

    async def cancel(self, principal: str, client: str, rpc_id: Any) -> None:
        """Cancel the call here if held here, and tell the other replicas."""
        ...
