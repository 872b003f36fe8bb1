"""The surface's ``/livez`` and ``/readyz`` follow its NATS connection on a real nats-server: ready while
connected, 503 naming the reconnect while the server is down, ready again once it is back."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
import pytest_asyncio
from starlette.applications import Starlette

from effectgate.devstack.servers import ServerProcess, nats_server
from effectgate.shared.runtime.nats_watch import ConnectionWatch
from effectgate.surface.adapters.health_routes import add_probes

pytestmark = pytest.mark.connected


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with nats_server(tmp_path / "nats") as process:
        yield process


class Watched:
    """A connection followed by a :class:`ConnectionWatch`, telling when its state changes."""

    def __init__(self) -> None:
        self.watch, self.changed = ConnectionWatch("the MCP surface", refused_exit_s=30.0), asyncio.Condition()

    async def _told(self, callback: Callable[[], Awaitable[None]]) -> None:
        async with self.changed:
            await callback()
            self.changed.notify_all()

    def callbacks(self) -> dict[str, Callable[[], Awaitable[None]]]:
        async def disconnected() -> None:
            await self._told(self.watch.on_disconnected)

        async def reconnected() -> None:
            await self._told(self.watch.on_reconnected)

        return {"disconnected_cb": disconnected, "reconnected_cb": reconnected}

    async def until(self, state: str) -> None:
        async with asyncio.timeout(15), self.changed:
            await self.changed.wait_for(lambda: self.watch.state == state)


@pytest_asyncio.fixture
async def watched(server: ServerProcess) -> AsyncIterator[Watched]:
    made = Watched()
    nc = await nats.connect(server.url, reconnect_time_wait=0.2, max_reconnect_attempts=-1, **made.callbacks())
    made.watch.follow(nc)
    yield made
    made.watch.stopping()
    await nc.close()


async def _probe(app: Starlette, path: str) -> tuple[int, Any]:
    """``(status, decoded JSON body)`` of ``GET path``, called through the app's ASGI interface."""
    sent: list[dict[str, Any]] = []
    scope = {"type": "http", "method": "GET", "path": path, "headers": [], "query_string": b"", "root_path": ""}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))


async def test_readyz_follows_the_nats_connection(server: ServerProcess, watched: Watched) -> None:
    app = Starlette()
    add_probes(app, watched.watch)
    assert await _probe(app, "/readyz") == (200, {"ready": True, "not_ready": {}})
    server.kill()
    await watched.until("reconnecting")
    status, body = await _probe(app, "/readyz")
    assert status == 503 and body["ready"] is False, body
    assert body["not_ready"]["nats"].startswith("not connected to NATS: reconnecting"), body
    assert await _probe(app, "/livez") == (200, {"live": True})
    server.restart()
    await watched.until("connected")
    assert await _probe(app, "/readyz") == (200, {"ready": True, "not_ready": {}})
