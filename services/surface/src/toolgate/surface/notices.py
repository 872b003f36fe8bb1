"""``tools/list_changed`` to each principal's clients, and to no one else's.

Every replica learns of registry and policy changes from NATS itself
(:mod:`toolgate.surface.adapters.changes`), re-lists the tools of the principals it serves
and tells only those whose listing changed, on both protocol revisions:

- 2026-07-28: ``subscriptions/listen`` streams (the SDK's ``ListenHandler``), one bus per
  principal, so a stream only ever carries its own principal's events;
- 2025-11-25 and earlier over stdio: ``notifications/tools/list_changed`` on the session
  (one process, one client). Legacy clients over HTTP have no stream to carry it (the
  surface is stateless, with no sessions); they see changes when they list again.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types import SubscriptionsListenRequestParams, SubscriptionsListenResult

__all__ = ["Notices"]

log = logging.getLogger("toolgate.surface.notices")


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
        if principal not in self._listen:
            self._buses[principal] = InMemorySubscriptionBus()
            self._listen[principal] = ListenHandler(self._buses[principal], max_subscriptions=64)
        return await self._listen[principal](ctx, params)

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
