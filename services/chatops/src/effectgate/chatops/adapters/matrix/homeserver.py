"""The chat-ops bot's connection to a Matrix homeserver: one login, the rooms joined, every failure mapped."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
from nio import AsyncClient, AsyncClientConfig, ErrorResponse, LoginResponse

from effectgate.chatops.errors import ChatOpsError, ChatRefused, ChatUnavailable

__all__ = ["Homeserver"]

log = logging.getLogger("effectgate.chatops.matrix")

_NETWORK_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)


class Homeserver:
    """The bot's nio client on ``homeserver`` as ``user_id`` (device ``device_id``).

    ``request_timeout_s`` bounds every request but the sync's wait, seconds.
    """

    def __init__(self, homeserver: str, user_id: str, password: str, device_id: str, request_timeout_s: float) -> None:
        config = AsyncClientConfig(
            max_limit_exceeded=0, max_timeouts=0, request_timeout=request_timeout_s, encryption_enabled=False
        )
        self.client = AsyncClient(homeserver, user_id, device_id=device_id, config=config)
        self.user_id, self._password = user_id, password
        self._joined: set[str] = set()
        self._login_lock = asyncio.Lock()

    async def send(self, room: str, content: dict[str, Any], txn_id: str | None, what: str) -> str:
        """Send ``content`` as an ``m.room.message`` into ``room`` (``txn_id``: stored once); its event id."""
        await self.ready(room)
        response = await self.call(what, self.client.room_send(room, "m.room.message", content, tx_id=txn_id))
        return str(response.event_id)

    async def ready(self, room: str) -> None:
        """Log in (once) and join ``room`` (once per process; joining a joined room changes nothing)."""
        await self.login()
        if room not in self._joined:
            await self.join(room)

    async def join(self, room: str) -> None:
        """Join ``room`` (accepting an invitation to it, too).

        Raises:
            ChatUnavailable / ChatRefused: as :meth:`call`.
        """
        await self.call(f"join {room}", self.client.join(room))
        self._joined.add(room)

    async def login(self) -> None:
        """Log in once (a login already held changes nothing).

        Raises:
            ChatRefused: the homeserver refused the bot's user or password.
            ChatUnavailable: it could not be reached.
        """
        async with self._login_lock:
            if self.client.logged_in:
                return
            response = await self.call("log in", self.client.login(self._password, device_name="effectgate chat-ops"))
            if not isinstance(response, LoginResponse):
                raise ChatRefused(f"Matrix login of {self.user_id} refused")
            log.info("logged in to Matrix as %s (device %s)", self.user_id, self.client.device_id)

    async def call(self, what: str, request: Any) -> Any:
        """Await one nio request; its error answer or a network failure as a :class:`ChatOpsError`."""
        try:
            response = await request
        except _NETWORK_ERRORS as error:
            raise ChatUnavailable(f"Matrix homeserver unreachable ({what}): {error!r}") from error
        if isinstance(response, ErrorResponse):
            raise self._failure(response, what)
        return response

    def _failure(self, response: ErrorResponse, what: str) -> ChatOpsError:
        status = response.transport_response.status if response.transport_response is not None else 0
        code = response.status_code or str(status)
        reason = f"Matrix refused to {what}: {code} {response.message}"
        if code == "M_LIMIT_EXCEEDED" or status == 429:
            return ChatUnavailable(reason, (response.retry_after_ms or 1000) / 1000)
        if code == "M_UNKNOWN_TOKEN":
            self.client.access_token, self._joined = "", set()  # logged out elsewhere: log in again next time
            return ChatUnavailable(reason)
        return ChatUnavailable(reason) if status >= 500 or status == 0 else ChatRefused(reason)
