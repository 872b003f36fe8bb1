"""``tools/list_changed`` to each principal's clients, and to no one else's."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types import SubscriptionsListenRequestParams, SubscriptionsListenResult

__all__ = ["Notices"]

log = logging.getLogger("effectgate.surface.notices")


class Notices:
    """Per-principal listeners of ``tools/list_changed``."""

    def __init__(self) -> None:
        self._buses: dict[str, InMemorySubscriptionBus] = {}
        self._listen: dict[str, ListenHandler] = {}
        self._sessions: dict[str, ServerSession] = {}

    async def listen(
        self, principal: str, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        """Serve one ``subscriptions/listen`` stream of ``principal`` until the client leaves."""
        self._bus(principal)
        return await self._listen[principal](ctx, params)

    def subscribe(self, principal: str, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener()`` on each change of ``principal``'s listing; returns the unsubscribe."""
        return self._bus(principal).subscribe(lambda _event: listener())

    def _bus(self, principal: str) -> InMemorySubscriptionBus:
        if principal not in self._buses:
            self._buses[principal] = InMemorySubscriptionBus()
            self._listen[principal] = ListenHandler(self._buses[principal], max_subscriptions=64)
        return self._buses[principal]

    def remember(self, principal: str, session: ServerSession) -> None:
        """Tell the client of ``session`` (legacy stdio: one client per process) when ``principal``'s listing changes.

        The latest request's session is kept: each request has its own, and all of one
        connection's send standalone notifications on the same channel.
        """
        self._sessions[principal] = session

    async def tools_changed(self, principal: str) -> None:
        """Send ``tools/list_changed`` to every client of ``principal`` (a closed session is skipped)."""
        if principal in self._buses:
            await self._buses[principal].publish(ToolsListChanged())
        session = self._sessions.get(principal)
        if session is None:
            return
        try:
            await session.send_tool_list_changed()
        except Exception as error:  # a gone client: forget it
            log.info("list_changed not delivered to the client of %s: %s", principal, type(error).__name__)
            self._sessions.pop(principal, None)
