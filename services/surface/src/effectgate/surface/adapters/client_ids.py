"""A stateless client identity for legacy HTTP clients, so a cancellation finds its call on any replica.

A 2025-11-25 client cancels a call with ``notifications/cancelled``, naming the call's JSON-RPC
id. On a stateless surface that notification arrives in a POST of its own, on any replica, and
JSON-RPC ids repeat across clients (each counts from 0 or 1).
"""

from __future__ import annotations

import re
import secrets

from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from effectgate.surface.cancels import CLIENT_ID

__all__ = ["ClientIds"]

_HEADER = b"mcp-session-id"
_VALID = re.compile(r"^[A-Za-z0-9_-]{16,64}\Z")


class ClientIds:
    """ASGI middleware: read the client id of each request, give one to a legacy client without it."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI request with :data:`CLIENT_ID` set."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        given = headers.get(_HEADER, b"").decode("latin-1")
        modern = headers.get(b"mcp-protocol-version", b"").decode("latin-1") in MODERN_PROTOCOL_VERSIONS
        client = given if _VALID.match(given) else ("" if modern else "c-" + secrets.token_urlsafe(18))
        token = CLIENT_ID.set(client)
        try:
            await self._app(scope, receive, _stamping(send, client) if client and client != given else send)
        finally:
            CLIENT_ID.reset(token)


def _stamping(send: Send, client: str) -> Send:
    """Add the client id to a successful response only: a refusal (401, 403, 413, …) starts nothing."""

    async def stamped(message: Message) -> None:
        if message["type"] == "http.response.start" and 200 <= message.get("status", 500) < 300:
            message = {**message, "headers": [*message.get("headers", []), (_HEADER, client.encode())]}
        await send(message)

    return stamped
