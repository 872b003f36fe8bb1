"""JSON-RPC envelopes the SDK's transport would take for notifications: refused with a reason instead."""

from __future__ import annotations

import json
from typing import Any

import pydantic_core
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from effectgate.contracts.json_flaws import flaw_of

__all__ = ["Envelopes", "bad_id", "unreadable"]


class Envelopes:
    """ASGI: refuse POSTed JSON-RPC requests whose ``id`` has a type MCP does not allow.

    Args:
        app: the SDK's endpoint.
        limit_bytes: the largest body read (a larger one is refused ``413``).
    """

    def __init__(self, app: ASGIApp, limit_bytes: int) -> None:
        self._app, self._limit = app, limit_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check one POST body, then serve the request with the body replayed."""
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self._app(scope, receive, send)
            return
        body, complete = await _read(receive, self._limit)
        if not complete:
            await _answer(send, 413, {"error": "request body too large", "limit_bytes": self._limit})
            return
        if (problem := bad_id(body)) is not None:
            await _answer(send, 400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": problem}})
            return
        if (problem := unreadable(body)) is not None:
            await _answer(send, 400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": problem}})
            return
        await self._app(scope, _replaying(body, receive), send)


async def _read(receive: Receive, limit: int) -> tuple[bytes, bool]:
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return b"", False
        chunks.append(chunk)
        if message["type"] != "http.request" or not message.get("more_body"):
            return b"".join(chunks), True


def bad_id(body: bytes) -> str | None:
    """Why ``body`` is a JSON-RPC request with an ``id`` JSON-RPC does not allow, or ``None`` (fine, or not JSON)."""
    try:
        message: Any = json.loads(body)
    except (ValueError, RecursionError):
        return None  # not JSON: the SDK refuses it as a parse error
    if not isinstance(message, dict) or "id" not in message or "method" not in message:
        return None
    found = message["id"]
    if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return None
    return f"invalid request: 'id' must be a string or an integer, not {_kind(found)}"


def unreadable(body: bytes) -> str | None:
    """``"Parse error: value at <JSON Pointer>: <what>"`` for a body the SDK's parser refuses, or ``None``.

    ``None`` too when the parser reads it, or when no place below the root can be named
    (the SDK's own parse error then answers it).
    """
    try:
        pydantic_core.from_json(body)
    except ValueError:
        where = flaw_of(body)
        return f"Parse error: value at {where}" if where else None
    return None


def _kind(value: Any) -> str:
    """What an ``id`` is, in JSON's terms (never its value: it may be huge)."""
    if value is None:
        return "null"
    return "a number with a fraction or an exponent" if isinstance(value, float) else type(value).__name__


def _replaying(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _answer(send: Send, status: int, payload: dict[str, Any]) -> None:
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
