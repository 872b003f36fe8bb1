"""Fair by principal on a running system: one agent's flood does not queue another agent behind it.

One agent submits thousands of requests in a few seconds — reads its rate allows and reads
the rate limits — while another makes sequential calls. The other agent's latency stays within
the bound ``docs/explanation/performance.md`` states (its p95 and its max), and every request
of both ends in exactly one receipt.

The module's stack publishes ``file_system`` with a ``list`` budget nobody reaches here
(the flood's allowed reads and the other agent's calls) and keeps ``read`` at its 5 per 60 s
(the flood's rate-limited reads).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.devstack.timing import scaled

from .support import Gate

pytestmark = [pytest.mark.e2e, pytest.mark.timing, pytest.mark.timeout(240)]

FLOOD = 3000
"""Requests the flooding agent submits, half allowed lists, half rate-limited reads."""

CALLS = 20
"""Sequential calls of the other agent, made while the flood's backlog is in the stream."""

BOUND_P95_S = 2.0
"""The other agent's p95 latency under the flood, at most (seconds, times the time factor)."""

BOUND_MAX_S = 4.0
"""The other agent's slowest call under the flood, at most (seconds, times the time factor)."""


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Any, repo_root: Path) -> dict[str, str]:
    tools = Path(e2e_paths.state).parent / "tools"
    tools.mkdir(exist_ok=True)
    descriptor = json.loads((repo_root / "deploy/tools/file_system.json").read_text())
    descriptor["operations"]["list"]["rate_limit"] = {"calls": 1_000_000, "period_s": 60}
    (tools / "file_system.json").write_text(json.dumps(descriptor))
    # the flood keeps both cores busy: a Redis answer slower than the default 0.5 s would deny a
    # call fail-closed, which is not what this module measures
    return {"EFFECTGATE_REGISTRY_DESCRIPTORS_DIR": str(tools), "EFFECTGATE_REDIS_TIMEOUT_S": "2.0"}


async def _flood(gate: Gate, agent: str, started: asyncio.Event) -> list[str]:
    """Submit :data:`FLOOD` requests as fast as the stream confirms them; their request ids."""
    client, ids = await gate.client(agent), []
    for _ in range(FLOOD // 100):
        calls = [("list", {"path": "."}) if n % 2 else ("read", {"path": "hello.txt"}) for n in range(100)]
        ids += await asyncio.gather(*(client.submit("file_system", op, args) for op, args in calls))
        if len(ids) >= FLOOD // 3:
            started.set()
    return ids


async def _timed_calls(gate: Gate, agent: str) -> list[float]:
    """The latency of each of :data:`CALLS` sequential calls, seconds; each must succeed."""
    latencies = []
    for _ in range(CALLS):
        began = time.monotonic()
        issued = await gate.call(agent, "list", {"path": "."}, timeout_s=scaled(60.0))
        latencies.append(time.monotonic() - began)
        assert issued.outcome == "succeeded", issued.reason
    return latencies


async def _receipts_of(gate: Gate, agent: str, ids: list[str], timeout_s: float) -> dict[str, int]:
    """How many receipts each of ``agent``'s stored receipt subjects holds, once all of ``ids`` have one."""
    deadline = time.monotonic() + timeout_s
    while True:
        info = await gate.js.stream_info("EFFECTGATE", subjects_filter=Subjects.receipts_of(agent))
        stored = dict(info.state.subjects or {})
        if len(stored) >= len(ids) or time.monotonic() > deadline:
            return stored
        await asyncio.sleep(0.5)


async def _fair_under_flood(gate: Gate) -> None:
    """The other agent's bound and one receipt per request of both, under one agent's flood."""
    flooder, other = gate.agent(1), gate.agent(1)
    await gate.call(other, "list", {"path": "."})  # connected and described before the clock starts
    started = asyncio.Event()
    flood = asyncio.create_task(_flood(gate, flooder, started))
    await started.wait()
    latencies = await _timed_calls(gate, other)
    ids = await flood
    p95, slowest = statistics.quantiles(latencies, n=20)[-1], max(latencies)
    median = statistics.median(latencies)
    print(f"other principal under a flood of {FLOOD}: p50 {median:.3f} s, p95 {p95:.3f} s, max {slowest:.3f} s")
    assert p95 <= scaled(BOUND_P95_S), latencies
    assert slowest <= scaled(BOUND_MAX_S), latencies
    stored = await _receipts_of(gate, flooder, ids, scaled(120.0))
    assert stored == {Subjects.receipt(flooder, request_id): 1 for request_id in ids}
    receipts = [await gate.receipt(flooder, request_id) for request_id in ids[:40]]
    assert {"succeeded", "denied"} == {issued.outcome for issued in receipts}
    assert "rate_limited" in {issued.reason_code for issued in receipts}
    assert len(await _receipts_of(gate, other, ["warm-up", *range(CALLS)], 0.0)) == CALLS + 1


async def test_a_flood_does_not_queue_another_principal_behind_it(gate: Gate) -> None:
    await _fair_under_flood(gate)


async def _pulling(gate: Gate, durable: str, replicas: int, timeout_s: float) -> None:
    """Wait until ``replicas`` pull requests stand open on ``durable`` (each replica keeps one)."""
    deadline = time.monotonic() + timeout_s
    while (await gate.js.consumer_info("EFFECTGATE", durable)).num_waiting < replicas:
        assert time.monotonic() < deadline, f"{durable}: fewer than {replicas} replicas pulling"
        await asyncio.sleep(0.2)


async def test_two_replicas_sharing_each_consumer_keep_the_bound(gate: Gate, stack: Stack) -> None:
    stack.start("policy", "policy-2")
    stack.start("executor", "executor-2")
    try:
        await _pulling(gate, catalog.POLICY_CONSUMER.durable, 2, scaled(60.0))
        await _pulling(gate, catalog.EXECUTOR_DECISIONS.durable, 2, scaled(60.0))
        await _fair_under_flood(gate)
        logs = stack.state_dir / "logs"
        assert catalog.POLICY_CONSUMER.durable in (logs / "policy-2.log").read_text()
        assert catalog.EXECUTOR_DECISIONS.durable in (logs / "executor-2.log").read_text()
    finally:
        stack.stop("policy-2")
        stack.stop("executor-2")
