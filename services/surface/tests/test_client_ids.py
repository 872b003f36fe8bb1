"""Stateless client ids for legacy HTTP clients."""

from __future__ import annotations

from typing import Any

from effectgate.surface.adapters.client_ids import ClientIds
from effectgate.surface.cancels import CLIENT_ID


async def serve(headers: list[tuple[bytes, bytes]]) -> tuple[str, list[tuple[bytes, bytes]]]:
    seen: list[str] = []
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(CLIENT_ID.get())
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def send(message: Any) -> None:
        sent.append(message)

    await ClientIds(app)({"type": "http", "headers": headers}, None, send)  # type: ignore[arg-type]
    return seen[0], sent[0]["headers"]


async def test_a_legacy_client_without_an_id_gets_one_and_keeps_it() -> None:
    given, headers = await serve([])
    assert given.startswith("c-") and (b"mcp-session-id", given.encode()) in headers
    again, headers = await serve([(b"mcp-session-id", given.encode())])
    assert again == given and headers == []


async def test_a_modern_request_gets_no_id_and_a_malformed_id_is_replaced() -> None:
    modern, headers = await serve([(b"mcp-protocol-version", b"2026-07-28")])
    assert modern == "" and headers == []
    replaced, headers = await serve([(b"mcp-session-id", b"x y\x00")])
    assert replaced.startswith("c-") and replaced != "x y"
