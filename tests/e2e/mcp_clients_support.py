"""MCP clients of the surface behind one small interface, and the approver's side: the CLI.

A *caller* makes ``tools/call`` requests through one real client and gives back what that
client gave: Pydantic AI's ``MCPToolset.direct_call_tool`` (an error result reaches its caller as
``ModelRetry``, the retry prompt the model would read) or the SDK's ``Client.call_tool`` (a
result with ``isError``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastmcp.client import Client as FastMCPClient
from fastmcp.client.transports import StreamableHttpTransport
from mcp_types import TextContent
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.mcp import MCPToolset

from effectgate.cli.stack.system import Stack

from .surface_support import http_client

EFFECTGATE = str(Path(sys.executable).parent / "effectgate")

CLIENTS = ["pydantic-ai", "pydantic-ai-legacy", "sdk-legacy", "sdk-2026-07-28"]
"""``pydantic-ai``: ``MCPToolset(url, headers=…)`` as a user writes it (its client picks the era);
``pydantic-ai-legacy``: the same on a FastMCP client pinned to the initialize handshake."""


@dataclass(frozen=True)
class Answer:
    """One ``tools/call`` as the client gave it: an error (result or exception) and its text."""

    is_error: bool
    text: str


Call = Callable[[str, dict[str, Any]], Awaitable[Answer]]


def framework_toolset(url: str, token: str, mode: str = "auto", **options: Any) -> MCPToolset[Any]:
    """Pydantic AI's toolset on ``url``: as a user writes it (``auto``), or on a FastMCP client pinned to ``mode``."""
    headers = {"Authorization": f"Bearer {token}"}
    if mode == "auto":
        return MCPToolset(url, headers=headers, **options)
    return MCPToolset(FastMCPClient(StreamableHttpTransport(url, headers=headers), mode=mode), **options)


@contextlib.asynccontextmanager
async def framework_caller(url: str, token: str, mode: str) -> AsyncIterator[Call]:
    async with framework_toolset(url, token, mode) as toolset:

        async def call(name: str, arguments: dict[str, Any]) -> Answer:
            try:
                value = await toolset.direct_call_tool(name, arguments)
            except ModelRetry as retry:
                return Answer(True, retry.message)
            return Answer(False, value if isinstance(value, str) else json.dumps(value))

        yield call


@contextlib.asynccontextmanager
async def sdk_caller(url: str, token: str, mode: str) -> AsyncIterator[Call]:
    async with http_client(url, token, mode) as client:

        async def call(name: str, arguments: dict[str, Any]) -> Answer:
            result = await client.call_tool(name, arguments)
            text = "\n".join(block.text for block in result.content if isinstance(block, TextContent))
            return Answer(result.is_error, text)

        yield call


def caller(kind: str, url: str, token: str) -> contextlib.AbstractAsyncContextManager[Call]:
    """The caller of client ``kind`` (one of :data:`CLIENTS`) acting with ``token``."""
    if kind.startswith("pydantic-ai"):
        return framework_caller(url, token, "legacy" if kind.endswith("legacy") else "auto")
    return sdk_caller(url, token, kind.removeprefix("sdk-"))


def is_pending(answer: Answer) -> bool:
    return answer.is_error and answer.text.startswith("effectgate: pending")


async def until_outcome(call: Call, name: str, arguments: dict[str, Any], tries: int = 10) -> Answer:
    """Call again with the same arguments while the answer is *pending* (what the model is told to do)."""
    for _ in range(tries):
        answer = await call(name, arguments)
        if not is_pending(answer):
            return answer
    raise AssertionError(f"still pending after {tries} calls: {answer.text}")


async def until_approval(call: Call, name: str, arguments: dict[str, Any], tries: int = 10) -> Answer:
    """Call again with the same arguments while the answer is *pending* and names no approval yet (no decision yet)."""
    for _ in range(tries):
        answer = await call(name, arguments)
        if not is_pending(answer) or "pending approval ap-" in answer.text:
            return answer
    raise AssertionError(f"no approval named after {tries} calls: {answer.text}")


async def waiting_approval(gate: Any, principal: str, timeout_s: float = 15.0) -> dict[str, Any]:
    """The one pending approval of ``principal`` (the approvals list item), waiting up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listed = await gate.approvals()
        found = [item for item in listed if item["principal"] == principal]
        if found:
            assert len(found) == 1, found
            return dict(found[0])
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no pending approval of {principal} in {timeout_s}s")


def effectgate(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the ``effectgate`` CLI against ``stack`` as an operator does (its state directory holds the credentials)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("EFFECTGATE_")}
    env.update({"NATS_URL": stack.nats_url, "EFFECTGATE_STATE_DIR": str(stack.state_dir), "COLUMNS": "100"})
    return subprocess.run([EFFECTGATE, *args], env=env, capture_output=True, text=True, timeout=60)


async def approve_with_cli(stack: Stack, approval_id: str, approver: str) -> subprocess.CompletedProcess[str]:
    """``effectgate approvals approve <approval_id> --as <approver>``, off the event loop."""
    return await asyncio.to_thread(effectgate, stack, "approvals", "approve", approval_id, "--as", approver)
