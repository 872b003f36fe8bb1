"""``toolgate bench``: governed-call cost as ratios to a bare NATS request/reply.

Both are measured in one run against the same nats-server: a bare nats-py
request/reply echo, and a governed READ_ONLY ``file_system.read`` through policy and
executor (with audit consuming every event). Absolute times on a shared machine are
noise; the ratios are the figure. In-process costs of one policy decision and one
argument validation are reported too.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec
import nats
from nats.aio.msg import Msg
from rich.console import Console
from rich.table import Table

from toolgate.cli.stack import DEPLOY_DIR, AuthMode, Stack, running_stack
from toolgate.contracts.descriptors import ToolDescriptor
from toolgate.contracts.nats_permissions import ADMIN, agent_user
from toolgate.contracts.schemas import first_error
from toolgate.sdk import ToolClient

__all__ = ["run_bench"]

AGENT = "bench-agent"
ECHO = "bench.echo"


@dataclass(frozen=True)
class Figures:
    """Latency percentiles (ms) of sequential calls and throughput (calls/s) of concurrent ones."""

    p50_ms: float
    p99_ms: float
    calls_per_s: float


def _bench_descriptor() -> ToolDescriptor:
    base = msgspec.json.decode((DEPLOY_DIR / "tools" / "file_system.json").read_bytes(), type=ToolDescriptor)
    read = {"read": base.operations["read"]}
    return msgspec.structs.replace(
        base,
        name="bench_fs",
        version="1.0.0",
        operations=read,
        rate_limit=msgspec.structs.replace(base.rate_limit, calls=1_000_000, period_s=1.0),
    )


async def _measure(call: Callable[[], Awaitable[None]], calls: int, concurrency: int) -> Figures:
    for _ in range(min(20, calls)):
        await call()
    latencies = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        latencies.append((time.perf_counter() - started) * 1000)
    gate = asyncio.Semaphore(concurrency)

    async def gated() -> None:
        async with gate:
            await call()

    started = time.perf_counter()
    await asyncio.gather(*(gated() for _ in range(calls)))
    quantiles = statistics.quantiles(latencies, n=100)
    return Figures(quantiles[49], quantiles[98], calls / (time.perf_counter() - started))


async def _bare(stack: Stack, calls: int, concurrency: int) -> Figures:
    """A bare echo between two connections of ``admin``: no toolgate user may use a subject outside the catalog."""
    options = stack.connect_options(ADMIN) if stack.has_user(ADMIN) else {}
    responder, client = await nats.connect(stack.nats_url, **options), await nats.connect(stack.nats_url, **options)

    async def echo(msg: Msg) -> None:
        await msg.respond(msg.data)

    await responder.subscribe(ECHO, cb=echo)
    await responder.flush()
    try:

        async def call() -> None:
            await client.request(ECHO, b'{"path":"data.txt"}', timeout=5)

        return await _measure(call, calls, concurrency)
    finally:
        await client.close()
        await responder.close()


async def _governed(stack: Stack, calls: int, concurrency: int) -> Figures:
    options = stack.connect_options(agent_user(AGENT))
    async with await ToolClient.connect(stack.nats_url, AGENT, public_keys=stack.public_keys, **options) as agent:

        async def call() -> None:
            receipt = await agent.invoke("bench_fs", "read", {"path": "data.txt"}, idempotency_key=uuid.uuid4().hex)
            if receipt.outcome.value != "succeeded":
                raise RuntimeError(f"governed call ended {receipt.outcome}: {receipt.reason}")

        return await _measure(call, calls, concurrency)


def _in_process_us() -> tuple[float, float]:
    from toolgate.policy.engine import load_policy

    policy = DEPLOY_DIR / "policy"
    descriptor = _bench_descriptor()
    engine = load_policy(policy / "policy.cedar", policy / "principals.toml", policy / "attributes.toml", [descriptor])
    spec = descriptor.operations["read"]
    arguments = {"path": "data.txt"}
    rounds = 2000
    started = time.perf_counter()
    for _ in range(rounds):
        engine.decide(AGENT, descriptor, "read", arguments)
    decide_us = (time.perf_counter() - started) / rounds * 1e6
    started = time.perf_counter()
    for _ in range(rounds):
        first_error(spec.input_schema, arguments)
    return decide_us, (time.perf_counter() - started) / rounds * 1e6


def _table(bare: Figures, governed: Figures, decide_us: float, validate_us: float) -> Table:
    table = Table(title="toolgate bench (same nats-server, same run)")
    for column in ("measure", "bare NATS request/reply", "governed READ_ONLY call", "ratio"):
        table.add_column(column, justify="right")
    table.add_row(
        "p50 latency", f"{bare.p50_ms:.3f} ms", f"{governed.p50_ms:.3f} ms", f"{governed.p50_ms / bare.p50_ms:.1f}×"
    )
    table.add_row(
        "p99 latency", f"{bare.p99_ms:.3f} ms", f"{governed.p99_ms:.3f} ms", f"{governed.p99_ms / bare.p99_ms:.1f}×"
    )
    table.add_row(
        "throughput",
        f"{bare.calls_per_s:.0f} calls/s",
        f"{governed.calls_per_s:.0f} calls/s",
        f"1/{bare.calls_per_s / governed.calls_per_s:.1f}",
    )
    table.add_row("policy decision (in-process)", "", f"{decide_us:.1f} µs", "")
    table.add_row("argument validation (in-process)", "", f"{validate_us:.2f} µs", "")
    return table


def run_bench(console: Console, calls: int, concurrency: int, insecure: bool = False) -> int:
    """Run the benchmark (NATS secured unless ``insecure``) and print its table; return the exit code."""
    root = Path(tempfile.mkdtemp(prefix="toolgate-bench-"))
    (root / "sandbox").mkdir()
    (root / "sandbox" / "data.txt").write_text("benchmark payload\n" * 8)
    tools = root / "tools"
    tools.mkdir()
    for shipped in (DEPLOY_DIR / "tools").glob("*.json"):
        (tools / shipped.name).write_bytes(shipped.read_bytes())
    (tools / "bench_fs.json").write_bytes(msgspec.json.encode(_bench_descriptor()))
    env = {"TOOLGATE_EXECUTOR_SANDBOX_ROOT": str(root / "sandbox"), "TOOLGATE_REGISTRY_DESCRIPTORS_DIR": str(tools)}
    with contextlib.ExitStack() as resources:
        with console.status("starting the system…"):
            auth: AuthMode = "open" if insecure else "secured"
            stack = resources.enter_context(running_stack(root / "state", env, auth=auth, admin=not insecure))
        console.print(f"{calls} sequential calls for latency, {calls} at concurrency {concurrency} for throughput")
        bare = asyncio.run(_bare(stack, calls, concurrency))
        governed = asyncio.run(_governed(stack, calls, concurrency))
    console.print(_table(bare, governed, *_in_process_us()))
    return 0
