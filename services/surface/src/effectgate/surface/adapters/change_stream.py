"""The GET stream of legacy HTTP clients, carrying ``notifications/tools/list_changed`` from any replica.

A 2025-11-25 client that holds an ``Mcp-Session-Id`` opens a GET on the MCP endpoint for the
server's notifications (MCP 2025-11-25, Transports, "Listening for Messages from the Server").
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import TokenVerifier
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

from effectgate.surface.notices import Notices

__all__ = ["ChangeStream"]

_EVENT = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n'
_KEEPALIVE = b": keep-alive\n\n"
KEEPALIVE_S = 15.0
STREAMS_PER_PRINCIPAL = 16
"""Open change streams one principal may hold on one replica; one more is refused ``429``."""


class ChangeStream:
    """ASGI: a legacy client's authenticated GET becomes its principal's list_changed stream.

    Args:
        app: the SDK's Streamable HTTP endpoint (behind its authentication).
        notices: the per-principal change listeners.
        fixed: the principal of an open surface (no tokens); ``None`` when tokens name it.
    """

    def __init__(
        self, app: ASGIApp, notices: Notices, fixed: str | None, verifier: TokenVerifier | None = None
    ) -> None:
        self._app, self._notices, self._fixed, self._verifier = app, notices, fixed, verifier
        self._open: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a legacy GET as the change stream; pass everything else on."""
        principal = self._principal(scope)
        if principal is None or not _legacy_get(scope):
            await self._app(scope, receive, send)
            return
        if self._open.get(principal, 0) >= STREAMS_PER_PRINCIPAL:
            await _refuse(send, f"{STREAMS_PER_PRINCIPAL} change streams of this principal are open already")
            return
        self._open[principal] = self._open.get(principal, 0) + 1
        try:
            await self._stream(principal, _bearer(scope), receive, send)
        finally:
            self._open[principal] -= 1

    def _principal(self, scope: Scope) -> str | None:
        user = scope.get("user")
        return user.access_token.client_id if isinstance(user, AuthenticatedUser) else self._fixed

    async def _stream(self, principal: str, token: str, receive: Receive, send: Send) -> None:
        changed: asyncio.Queue[None] = asyncio.Queue(maxsize=1)  # a burst is one notice: clients list again
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        unsubscribe = self._notices.subscribe(principal, lambda: _offer(changed))
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_until_gone, receive, tasks.cancel_scope)
                while (frame := await _next(changed)) and await self._still_valid(token):
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
                tasks.cancel_scope.cancel()
        finally:
            unsubscribe()

    async def _still_valid(self, token: str) -> bool:
        """Whether the stream's token is still accepted (revoked, expired: the stream ends)."""
        return self._verifier is None or await self._verifier.verify_token(token) is not None


def _bearer(scope: Scope) -> str:
    value = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
    return value[7:] if value.lower().startswith("bearer ") else ""


async def _refuse(send: Send, why: str) -> None:
    body = why.encode()
    headers = [(b"content-type", b"text/plain"), (b"retry-after", b"30")]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _legacy_get(scope: Scope) -> bool:
    if scope.get("type") != "http" or scope.get("method") != "GET":
        return False
    headers = dict(scope.get("headers") or [])
    version = headers.get(b"mcp-protocol-version", b"").decode("latin-1")
    return version not in MODERN_PROTOCOL_VERSIONS and b"text/event-stream" in headers.get(b"accept", b"")


def _offer(changed: asyncio.Queue[None]) -> None:
    if changed.empty():
        changed.put_nowait(None)


async def _next(changed: asyncio.Queue[None]) -> bytes:
    try:
        await asyncio.wait_for(changed.get(), KEEPALIVE_S)
    except TimeoutError:
        return _KEEPALIVE
    return _EVENT


async def _until_gone(receive: Receive, scope: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()
