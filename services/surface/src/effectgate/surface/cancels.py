"""Cancellations of calls in flight, wherever the call is held.

A call in flight is registered under ``(principal, client id, JSON-RPC id)``
(:mod:`effectgate.surface.adapters.client_ids`).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator
from typing import Any

import anyio

__all__ = ["CLIENT_ID", "Cancels", "call_of"]

CLIENT_ID: contextvars.ContextVar[str] = contextvars.ContextVar("effectgate_mcp_client_id", default="")
"""The current request's client id (``""`` when it has none: stdio, 2026-07-28), set by
:mod:`effectgate.surface.adapters.client_ids`."""

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
