"""The governed call against the size of the registry: filler tools published the operator's way."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import msgspec
import nats
from nats.aio.client import Client

from effectgate.cli.bench.floors import admin_options
from effectgate.cli.bench.governed import bench_descriptor
from effectgate.cli.bench.processes import cpu_ticks
from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.integrity.signing import load_private_key, sign_value
from effectgate.shared.stores.tools_kv import ToolsBucket

__all__ = ["FILLER", "PUBLISH_IN_FLIGHT", "SETTLE_S", "filler_bodies", "grow_registry", "quiet", "registered"]

PUBLISH_IN_FLIGHT = 32
"""Publish requests in flight at once while the registry is grown."""

SETTLE_S = 6.0
"""Seconds waited after a step for the policy's registry refresh (every 5 s by default) to have run."""

PUBLISH_TIMEOUT_S = 30.0

QUIET_TICKS = 10
"""CPU ticks (1/100 s on Linux) at most in each of two 1-second windows for a process to count as quiet."""

QUIET_TIMEOUT_S = 300.0

FILLER = "bench_filler_"


def filler_bodies(first: int, count: int, key_path: Path) -> list[bytes]:
    """``tg.registry.publish`` bodies of fillers ``first`` … ``first + count - 1``, signed with the key at ``key_path``.

    Raises:
        OSError / ValueError: the operator key could not be read.
    """
    key, base = load_private_key(key_path), msgspec.to_builtins(bench_descriptor())
    bodies = []
    for number in range(first, first + count):
        descriptor = {**base, "name": f"{FILLER}{number:05d}"}
        bodies.append(msgspec.json.encode({"descriptor": descriptor, "signature": sign_value(descriptor, key)}))
    return bodies


async def registered(nc: Client) -> list[str]:
    """Names of the tools in the registry now (those with a ``latest`` key), sorted."""
    return await (await ToolsBucket.open(nc.jetstream())).tool_names()


async def quiet(pid: int, timeout_s: float = QUIET_TIMEOUT_S) -> None:
    """Return once process ``pid`` used at most :data:`QUIET_TICKS` of CPU in each of two 1-second windows in a row.

    Raises:
        TimeoutError: still busy after ``timeout_s`` seconds.
        OSError: no such process.
    """
    async with asyncio.timeout(timeout_s):
        calm, ticks = 0, cpu_ticks(pid)
        while calm < 2:
            await asyncio.sleep(1.0)
            calm, ticks = (calm + 1 if cpu_ticks(pid) - ticks <= QUIET_TICKS else 0), cpu_ticks(pid)


async def _publish_all(nc: Client, bodies: list[bytes]) -> None:
    gate = asyncio.Semaphore(PUBLISH_IN_FLIGHT)

    async def publish(body: bytes) -> None:
        async with gate:
            answer = await nc.request(Rpc.REGISTRY_PUBLISH, body, PUBLISH_TIMEOUT_S)
        reply: dict[str, Any] = msgspec.json.decode(answer.data)
        if not reply.get("ok"):
            raise RuntimeError(f"filler not published: {reply.get('reason_code')}: {reply.get('reason')}")

    await asyncio.gather(*(publish(body) for body in bodies))


async def grow_registry(stack: Stack, tools: int) -> tuple[int, float]:
    """Publish fillers until the registry holds ``tools`` tools (none when it already does), then settle.

    Returns:
        ``(tools registered now, seconds the publishing took)``.

    Raises:
        RuntimeError: the registry refused a filler.
        TimeoutError: the registry did not answer within 30 s, or the policy stayed busy (:func:`quiet`).
    """
    nc = await nats.connect(servers=stack.nats_servers, **admin_options(stack))
    try:
        names = await registered(nc)
        fillers = sum(name.startswith(FILLER) for name in names)
        bodies = filler_bodies(fillers + 1, max(0, tools - len(names)), stack.keys_dir("operator") / "operator.key")
        started = time.perf_counter()
        await _publish_all(nc, bodies)
        took_s = time.perf_counter() - started
        await asyncio.sleep(SETTLE_S)
        for name in stack.replicas("policy"):
            await quiet(stack.processes[name].pid)
        return len(await registered(nc)), took_s
    finally:
        await nc.close()
