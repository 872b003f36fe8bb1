"""``effectgate bench --flood N``: the governed call of one agent while another floods the gateway.

``demo-agent`` submits ``N`` requests as fast as the stream confirms them, half ``bench_fs``
reads (allowed) and half ``file_system`` reads (refused by that tool's rate limit after its
first few); once a third are submitted, ``bench-agent`` makes :data:`OTHER_CALLS` governed
calls one after another. Printed: their p50, p95 and max (docs/explanation/fairness.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from effectgate.cli.bench.figures import percentile
from effectgate.cli.bench.governed import TOOL, settled
from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus.nats_permissions import agent_user
from effectgate.sdk import ToolClient

__all__ = ["FLOODER", "OTHER_CALLS", "FloodFigures", "under_flood"]

FLOODER = "demo-agent"
"""The flooding principal (in the shipped principal directory, with a NATS user of its own)."""

OTHER_CALLS = 20
"""Governed calls ``bench-agent`` makes during the flood, one after another."""

CHUNK = 100
"""Flood requests submitted at once (each awaits the stream's confirmation)."""


@dataclass(frozen=True)
class FloodFigures:
    """The other principal's calls under one flood.

    Attributes:
        flood: requests the flooding principal submitted.
        submit_s: seconds it took to submit them.
        drained_s: seconds from the flood's first request until every consumer had handled all of it.
        p50_ms / p95_ms / max_ms: latency of the other principal's :data:`OTHER_CALLS` calls, milliseconds.
    """

    flood: int
    submit_s: float
    drained_s: float
    p50_ms: float
    p95_ms: float
    max_ms: float


async def _submitted(agent: ToolClient, flood: int, started: asyncio.Event) -> float:
    """Submit ``flood`` requests (allowed and rate-limited reads alternating); the seconds it took."""
    began, sent = time.monotonic(), 0
    while sent < flood:
        calls = [TOOL if n % 2 else "file_system" for n in range(sent, min(sent + CHUNK, flood))]
        await asyncio.gather(*(agent.submit(tool, "read", {"path": "data.txt"}) for tool in calls))
        sent += len(calls)
        if sent >= flood // 3:
            started.set()
    return time.monotonic() - began


async def _timed(call: Callable[[], Awaitable[None]]) -> list[float]:
    latencies = []
    for _ in range(OTHER_CALLS):
        began = time.monotonic()
        await call()
        latencies.append((time.monotonic() - began) * 1000)
    return latencies


async def under_flood(stack: Stack, flood: int, call: Callable[[], Awaitable[None]]) -> FloodFigures:
    """``call`` (the governed call) timed :data:`OTHER_CALLS` times while :data:`FLOODER` submits ``flood`` requests.

    Raises:
        RuntimeError: a governed call did not succeed.
        TimeoutError: the flood was not handled within a minute plus 20 ms per request.
    """
    options = stack.connect_options(agent_user(FLOODER))
    async with await ToolClient.connect(stack.nats_url, FLOODER, public_keys=stack.public_keys, **options) as agent:
        started, began = asyncio.Event(), time.monotonic()
        submitting = asyncio.create_task(_submitted(agent, flood, started))
        try:
            await started.wait()
            latencies = await _timed(call)
            submit_s = await submitting
        finally:
            submitting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await submitting
        await settled(stack, timeout_s=60.0 + 0.02 * flood)
    drained_s = time.monotonic() - began
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    return FloodFigures(flood, submit_s, drained_s, p50, p95, max(latencies))
