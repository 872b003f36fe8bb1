"""Two surface replicas and one client whose requests alternate between them; clients that give up at 60 s.

No sticky routing: every request of one client goes to the other replica than the one before
(an HTTP transport that alternates ports). Nothing a replica keeps in memory is needed by the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types import ToolListChangedNotification

from effectgate.contracts.bus.catalog import Subjects
from effectgate.surface.settings import SurfaceSettings

from .support import Gate, Paths
from .surface_support import Surfaces, http_client

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


class Alternating(httpx2.AsyncBaseTransport):
    """Sends each request to the next of ``ports`` in turn (what a load balancer without affinity does)."""

    def __init__(self, ports: list[int]) -> None:
        self._ports = itertools.cycle(ports)
        self._inner = httpx2.AsyncHTTPTransport()
        self.sent: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = next(self._ports)
        self.sent.append(port)
        request.url = request.url.copy_with(port=port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.fixture(scope="module")
def replicas(surfaces: Surfaces) -> list[str]:
    return [surfaces.start(EFFECTGATE_SURFACE_HOLD_S="2") for _ in range(2)]


def port_of(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])


@contextlib.asynccontextmanager
async def alternating_client(replicas: list[str], token: str, mode: str) -> AsyncIterator[tuple[Client, Alternating]]:
    transport = Alternating([port_of(url) for url in replicas])
    http = httpx2.AsyncClient(transport=transport, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(replicas[0], http_client=http), mode=mode) as client:
        yield client, transport


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_requests_alternating_between_replicas_see_no_session_error_and_one_run(
    gate: Gate, surfaces: Surfaces, replicas: list[str], e2e_paths: Paths, new_id: Any, mode: str
) -> None:
    principal, name = gate.agent(), f"{new_id('r')}.txt"
    arguments = {"path": name, "content": "one run\n"}
    async with alternating_client(replicas, surfaces.token_of(principal), mode) as (client, transport):
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "file_system__write" in names
        read = await client.call_tool("file_system__read", {"path": "hello.txt"})
        pending = await client.call_tool("file_system__write", arguments)
        again = await client.call_tool("file_system__write", arguments)
        held = (pending.meta or {})["io.effectgate/pending"]
        assert (again.meta or {})["io.effectgate/pending"] == held  # the other replica found the same call
        assert (await gate.decide("bob", held["approval_id"]))["ok"]
        outcome = await client.call_tool("file_system__write", arguments)
    assert read.is_error is False and outcome.is_error is False
    assert len(set(transport.sent)) == 2 and len(transport.sent) >= 5
    assert (e2e_paths.sandbox / name).read_text() == "one run\n"
    assert await gate.count(Subjects.request(principal)) == 2  # the read and the write, each once


async def _first_change(client: Client, seen: asyncio.Event) -> ToolsListChanged:
    async with client.listen(tools_list_changed=True) as subscription:
        seen.set()
        async for event in subscription:
            if isinstance(event, ToolsListChanged):
                return event
    raise AssertionError("the listen stream ended without a change")


async def test_a_published_tool_reaches_clients_of_both_replicas_as_list_changed(
    gate: Gate, surfaces: Surfaces, replicas: list[str], new_id: Any
) -> None:
    principal = gate.agent()
    tool = f"fsx{new_id('')[:8]}".lower()
    descriptor = {**json.loads((ROOT / "deploy/tools/file_system.json").read_text()), "name": tool}
    async with (
        http_client(replicas[0], surfaces.token_of(principal), "2026-07-28") as first,
        http_client(replicas[1], surfaces.token_of(principal), "2026-07-28") as second,
    ):
        before = {tool.name for tool in (await first.list_tools()).tools}
        await second.list_tools()
        ready = [asyncio.Event(), asyncio.Event()]
        waits = [asyncio.create_task(_first_change(c, e)) for c, e in zip((first, second), ready, strict=True)]
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in ready)), 10)
        assert (await gate.publish_tool(descriptor))["ok"]
        changes = await asyncio.wait_for(asyncio.gather(*waits), 15)
        after = {tool.name for tool in (await first.list_tools(cache_mode="refresh")).tools}
    assert all(isinstance(change, ToolsListChanged) for change in changes)
    assert f"{tool}__read" in after - before


async def test_a_client_giving_up_before_the_approval_gets_the_outcome_on_a_later_call(
    gate: Gate, surfaces: Surfaces, e2e_paths: Paths, new_id: Any
) -> None:
    """The surface holds a call (here 4 s) well inside the client's read timeout (here 12 s), approval at 18 s.

    The shipped hold (20 s) stands to a client's usual 60 s as 4 s stands to 12 s here.
    """
    assert SurfaceSettings.model_fields["hold_s"].default * 3 <= 60.0
    principal, name = gate.agent(), f"{new_id('slow')}.txt"
    url = surfaces.start(EFFECTGATE_SURFACE_HOLD_S="4")
    arguments = {"path": name, "content": "after eighteen seconds\n"}
    started, results, longest = time.monotonic(), [], 0.0

    async def approve_at_18s() -> None:
        item = await _pending_of(gate, principal)
        await asyncio.sleep(max(0.0, 18.0 - (time.monotonic() - started)))
        assert (await gate.decide("bob", item["approval_id"]))["ok"]

    approver = asyncio.create_task(approve_at_18s())
    async with http_client(url, surfaces.token_of(principal), "legacy", read_timeout_seconds=12.0) as client:
        while not results or results[-1].is_error:
            began = time.monotonic()
            results.append(await client.call_tool("file_system__write", arguments))
            longest = max(longest, time.monotonic() - began)
            assert len(results) <= 8, [r.content for r in results]
    await approver
    assert time.monotonic() - started >= 18.0 and longest < 12.0 and len(results) >= 3
    assert all("pending approval ap-" in r.content[0].text for r in results[:-1])  # type: ignore[union-attr]
    assert (e2e_paths.sandbox / name).read_text() == "after eighteen seconds\n"
    assert await gate.count(Subjects.request(principal)) == 1
    assert await gate.count(f"tg.receipt.{principal}.*") == 1


async def _pending_of(gate: Gate, principal: str) -> dict[str, Any]:

    for _ in range(300):
        listed = [item for item in await gate.approvals() if item["principal"] == principal]
        if listed:
            return dict(listed[0])
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no pending approval of {principal}")


async def test_legacy_http_clients_of_both_replicas_hear_list_changed_on_their_get_stream(
    gate: Gate, surfaces: Surfaces, replicas: list[str], new_id: Any
) -> None:
    principal, other = gate.agent(), gate.agent()
    heard = {name: asyncio.Event() for name in ("first", "second", "other")}

    def handler(name: str) -> Any:
        async def on_message(message: Any) -> None:
            if isinstance(message, ToolListChangedNotification):
                heard[name].set()

        return on_message

    tool = f"fsl{new_id('')[:8]}".lower()
    descriptor = {**json.loads((ROOT / "deploy/tools/file_system.json").read_text()), "name": tool}
    token = surfaces.token_of(principal)
    async with (
        http_client(replicas[0], token, "legacy", message_handler=handler("first")) as first,
        http_client(replicas[1], token, "legacy", message_handler=handler("second")) as second,
        http_client(replicas[1], surfaces.token_of(other), "legacy", message_handler=handler("other")) as third,
    ):
        for client in (first, second, third):
            await client.list_tools()
        await asyncio.sleep(1.0)  # the clients open their GET streams after the handshake
        assert (await gate.publish_tool(descriptor))["ok"]
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in heard.values())), 15)
        assert f"{tool}__read" in {t.name for t in (await second.list_tools()).tools}
