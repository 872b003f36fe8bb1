"""Cancellations of calls in flight, wherever the call is held.

A call in flight is registered under ``(principal, client id, JSON-RPC id)``
(:mod:`toolgate.surface.adapters.client_ids`). A ``notifications/cancelled`` is relayed over
NATS to every replica (core subject ``tg.mcp.cancel.<principal>``,
:mod:`toolgate.surface.adapters.cancel_relay`); the replica holding the call cancels its wait,
and the call's own cancellation path withdraws it (:mod:`toolgate.surface.gateway`). Only the
principal's own calls can be named: the principal comes from the token of the notification.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import anyio

__all__ = ["Cancels", "call_of"]

CallId = tuple[str, str, str]


def call_of(principal: str, client: str, rpc_id: Any) -> CallId:
    """The key of one call in flight (a JSON-RPC id may be a number or a string: kept apart)."""
    return principal, client, json.dumps(rpc_id)


class Cancels:
    """The calls this replica holds, by :func:`call_of`."""

    def __init__(self) -> None:
        self._held: dict[CallId, anyio.CancelScope] = {}

    @contextlib.contextmanager
    def holding(self, call: CallId) -> Iterator[anyio.CancelScope]:
        """Register the call while the block runs; a cancellation ends the block (``cancelled_caught``)."""
        with anyio.CancelScope() as scope:
            self._held[call] = scope
            try:
                yield scope
            finally:
                if self._held.get(call) is scope:
                    del self._held[call]

    def cancel(self, call: CallId) -> bool:
        """Cancel the call if this replica holds it; whether it did."""
        scope = self._held.get(call)
        if scope is None:
            return False
        scope.cancel()
        return True
