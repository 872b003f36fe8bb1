"""The connections of one configured MCP server: the current one, replaced once lost, and those still stopping.

A lost :class:`~.connection.Connection` is never restarted; the next call gets a new one
(:meth:`McpSession.connection`). Stopping closes every connection and waits, bounded, for
its server process to end.
"""

from __future__ import annotations

import asyncio

from effectgate.executor.adapters.mcp.connection import Connection
from effectgate.shared.mcp.servers import McpServerConfig

__all__ = ["McpSession"]

_GRACE_S = 10.0
"""How long :meth:`McpSession.stop` lets a connection shut down before cancelling it, seconds."""


class McpSession:
    """The connections of one configured server: the current one, and those still shutting down.

    Args:
        config: the server's configuration.
        start_timeout_s: limit for one start (spawn, handshake, first listing), seconds.
    """

    def __init__(self, config: McpServerConfig, start_timeout_s: float) -> None:
        self.config = config
        self._start_timeout_s = start_timeout_s
        self._current: Connection | None = None
        self._open: set[Connection] = set()

    def connection(self) -> Connection:
        """The current connection, or a new one (starting) when there is none or it was lost."""
        current = self._current
        if current is None or current.lost:
            current = self._current = Connection(self.config, self._start_timeout_s)
            self._open.add(current)
            current.owner.add_done_callback(lambda _: self._open.discard(current))
        return current

    async def stop(self) -> None:
        """Stop every connection and wait for its server process to end.

        Safe while calls are in flight or after they were cancelled (they end as their
        connection is lost). Raises nothing, ``CancelledError`` included, unless the
        calling task itself is cancelled.
        """
        connections, self._current = set(self._open), None
        for connection in connections:
            connection.close()
        pending = await _wait_owners(connections, _GRACE_S)
        for connection in pending:
            connection.cancel()
        pending = await _wait_owners(pending, _GRACE_S)
        for connection in pending:
            connection.owner.cancel()
        await _wait_owners(pending, _GRACE_S)


async def _wait_owners(connections: set[Connection], timeout_s: float) -> set[Connection]:
    """Wait up to ``timeout_s`` for the owners to end; return the connections still running."""
    owners = {connection.owner for connection in connections if not connection.owner.done()}
    if owners:
        await asyncio.wait(owners, timeout=timeout_s)
    return {connection for connection in connections if not connection.owner.done()}
