"""The clustered stack survives losing any one node: each loss in turn, while agents keep calling.

The stack is ``effectgate up --cluster 3``'s: three NATS nodes with the bus at R3, Redis as a
primary, a replica and three Sentinels, two replicas of every service (the audit's sharing
one chain under the writer's lease). Agents (``load_support.py``) read, write under
idempotency keys and wait for approvals while, one after the other:

(a) the node leading the record stream is killed; (b) the node leading each KV bucket (in
turn, until every bucket's leader at that moment was killed once); (c) the node holding most
service connections; (d) the Redis primary (the Sentinels promote the replica); (e) one
replica of each service (the audit's: the writer). A node stays down until calls have
resumed, then is restarted and every stream caught up before the next fault.

After each, and at the end: every request has exactly one receipt, no effect ran twice
(counted at the tool, inotify), every ``uncertain`` overlaps a kill, the audit chain verifies
with nothing missing (nor before its first record), and calls resumed within
:data:`RESUMED_WITHIN_S` of the kill, while the killed node was still down. ``-s`` prints the
fault table.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from effectgate.cli.stack.readiness import wait_ready
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import LEASES_BUCKET, Leases
from effectgate.devstack.timing import scaled

from .cluster_support import BUCKETS, STREAMS, fail_over_redis, kill_node, leader, restart_node, service_connections
from .load_checks import (
    IN_MOVED_TO,
    audit_problems,
    effect_problems,
    overlaps,
    read_problems,
    receipt_problems,
    uncertain_problems,
)
from .load_support import LOAD_DIR, PATIENCE_S, Fault, Ledger, audit, background, collect, now, run_agent

pytestmark = [pytest.mark.e2e, pytest.mark.fault, pytest.mark.timing]

RESUMED_WITHIN_S = scaled(15.0)
"""Bound on a pause: from a kill until a request submitted after it has its receipt, seconds
(15 on an idle machine, times ``EFFECTGATE_TEST_TIME_FACTOR`` on a loaded one)."""
AGENTS = {1: 6, 2: 12}
"""Agents per autonomy: each calls every 12.5 s (its rate limit), about 1.4 submissions a second."""
WARM_UP_S = 8.0
REPLICATED = ("registry", "policy", "approvals", "executor", "audit")


@pytest.fixture(scope="module")
def stack_cluster() -> int:
    return 3


@pytest.fixture(scope="module")
def stack_env() -> dict[str, str]:
    return {
        "EFFECTGATE_EXECUTOR_BACKSTOP_UNDECIDED_S": "20",
        "EFFECTGATE_EXECUTOR_BACKSTOP_MARGIN_S": "5",
        "EFFECTGATE_EXECUTOR_STALE_GRACE_S": "5",
        "EFFECTGATE_APPROVALS_TTL_S": "60",
    }


@dataclass
class Row:
    """One line of the fault table."""

    fault: str
    in_flight: int
    pause_s: float | None
    window: Fault | None = None


def _in_flight(ledger: Ledger) -> int:
    """Requests submitted within an agent's patience and not answered yet."""
    recent = now() - timedelta(seconds=PATIENCE_S)
    return sum(1 for sent in ledger.sent if sent.received is None and sent.submitted >= recent)


async def _resumed(ledger: Ledger, since: float, began: Any) -> float | None:
    """Seconds from ``since`` until a request submitted after the kill got a receipt; ``None``: not in bound."""
    while time.monotonic() - since < RESUMED_WITHIN_S + 10:
        answered = [
            s.received - since
            for s in ledger.sent
            if s.submitted >= began and s.received is not None and s.receipt and s.receipt.outcome == "succeeded"
        ]
        if answered:
            return min(answered)
        await asyncio.sleep(0.1)
    return None


async def _fault(
    ledger: Ledger,
    rows: list[Row],
    label: str,
    kill: Callable[[], Awaitable[None]],
    recover: Callable[[], Awaitable[None]],
) -> None:
    """Inject one fault, measure the pause while it lasts, then recover; a row and a fault window."""
    row, began, since = Row(label, _in_flight(ledger), None), now(), time.monotonic()
    await kill()
    row.pause_s = await _resumed(ledger, since, began)
    await recover()
    row.window = Fault(label, began, now())
    ledger.faults.append(row.window)
    rows.append(row)


async def _node_fault(gate: Any, ledger: Ledger, rows: list[Row], label: str, name: str) -> None:
    async def kill() -> None:
        await kill_node(gate.stack, name)

    async def recover() -> None:
        await restart_node(gate.stack, name, gate.js)

    await _fault(ledger, rows, f"{label}: node {name}", kill, recover)


async def _bucket_leaders(gate: Any, ledger: Ledger, rows: list[Row]) -> None:
    """(b): kill the leader of a bucket not covered yet, with every bucket it leads, until all are covered."""
    left = list(BUCKETS)
    while left:
        led = {bucket: leader(gate.stack, f"KV_{bucket}") for bucket in left}
        name = led[left[0]]
        covered = [bucket for bucket in left if led[bucket] == name]
        short = ", ".join(bucket.removeprefix("EFFECTGATE_") for bucket in covered)
        await _node_fault(gate, ledger, rows, f"(b) leader of {short}", name)
        left = [bucket for bucket in left if bucket not in covered]


async def _redis_primary(gate: Any, ledger: Ledger, rows: list[Row]) -> None:
    killed: list[str] = []

    async def kill() -> None:
        killed.append(await fail_over_redis(gate.stack))

    async def recover() -> None:
        return None

    await _fault(ledger, rows, "(d) Redis primary (Sentinel failover)", kill, recover)


async def _audit_writer(gate: Any) -> str:
    """The process name of the audit replica holding the writer's lease (its pid is in the lease)."""
    kv = await gate.js.key_value(LEASES_BUCKET)
    pid = int((await kv.get(Leases.AUDIT_WRITER)).value.decode().split(":")[1])
    return str(next(name for name, process in gate.stack.processes.items() if process.pid == pid))


async def _one_replica_each(gate: Any, ledger: Ledger, rows: list[Row]) -> None:
    """(e): SIGKILL one replica of every service at once (the audit's writer), restart them after."""
    writer = await _audit_writer(gate)
    names = [writer if service == "audit" else gate.stack.replicas(service)[-1] for service in REPLICATED]

    async def kill() -> None:
        for name in names:
            gate.stack.stop(name, kill=True)

    async def recover() -> None:
        for name in names:
            gate.stack.start(gate.stack.service_of(name), name)
        await wait_ready(gate.stack, REPLICATED)

    await _fault(ledger, rows, f"(e) replicas {', '.join(names)}", kill, recover)


async def _faults(gate: Any, ledger: Ledger, rows: list[Row]) -> None:
    await asyncio.sleep(WARM_UP_S)
    await _node_fault(gate, ledger, rows, "(a) record stream leader", leader(gate.stack, catalog.STREAM))
    await _bucket_leaders(gate, ledger, rows)
    held = service_connections(gate.stack)
    name, count = held.most_common(1)[0]
    what = "service connections" if gate.stack.credentials else "connections (open: services and agents)"
    await _node_fault(gate, ledger, rows, f"(c) {count} of {sum(held.values())} {what}", name)
    await _redis_primary(gate, ledger, rows)
    await _one_replica_each(gate, ledger, rows)


async def _run(gate: Any, ledger: Ledger, rows: list[Row]) -> None:
    principals = [gate.agent(autonomy) for autonomy, count in AGENTS.items() for _ in range(count)]
    for principal in principals:
        await gate.client(principal)
    stop = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        for principal in principals:
            group.create_task(run_agent(gate, ledger, principal, stop))
        try:
            await _faults(gate, ledger, rows)
        finally:
            stop.set()


def _table(rows: list[Row], ledger: Ledger, moved: Counter[str]) -> list[str]:
    head = f"{'fault':<58} {'in flight':>9} {'pause s':>8} {'receipts':>8} {'double':>6} {'uncertain':>9}"
    lines = [head]
    for row in rows:
        assert row.window is not None
        during = [s for s in ledger.sent if s.receipt and overlaps(s, row.window)]
        double = sum(1 for s in during if s.call.operation == "write" and moved[s.call.path.split("/")[-1]] > 1)
        uncertain = sum(1 for s in during if s.receipt and s.receipt.outcome == "uncertain")
        pause = "-" if row.pause_s is None else f"{row.pause_s:.1f}"
        receipts = sum(s.copies for s in during)
        lines.append(f"{row.fault[:58]:<58} {row.in_flight:>9} {pause:>8} {receipts:>8} {double:>6} {uncertain:>9}")
    return lines


async def test_the_cluster_stack_runs_the_bus_at_r3_and_every_service_twice(gate: Any) -> None:
    for stream in STREAMS:
        info = await gate.js.stream_info(stream)
        assert info.config.num_replicas == 3, f"{stream} has {info.config.num_replicas} replicas"
    for service in REPLICATED:
        assert len(gate.stack.replicas(service)) == 2, f"{service}: {gate.stack.replicas(service)}"
    assert gate.stack.redis_url.startswith("redis+sentinel://")
    assert len(gate.stack.nats_servers) == 3


@pytest.mark.timeout(300)
async def test_any_one_node_lost_in_turn_leaves_one_receipt_per_request_and_one_effect_per_call(
    gate: Any, watch: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox, rows = gate.paths.sandbox, list[Row]()
    (sandbox / LOAD_DIR).mkdir()
    watch.watch(sandbox / LOAD_DIR)
    ledger = Ledger(random.Random(0))

    async with background(gate, ledger, watch):
        await _run(gate, ledger, rows)
        problems = await collect(gate, ledger)
    verified = await audit(gate)
    moved = Counter(name for _, name, mask in watch.poll() if mask & IN_MOVED_TO)
    table = _table(rows, ledger, moved)
    with capsys.disabled():
        print("\n" + "\n".join(table) + f"\n{len(ledger.sent)} requests, audit {verified['total']} records")

    problems += receipt_problems(ledger) + effect_problems(sandbox, ledger, moved) + read_problems(sandbox, ledger)
    problems += uncertain_problems(ledger, {row.fault for row in rows}) + audit_problems(verified)
    problems += [f"{row.fault}: calls resumed after {row.pause_s} s" for row in rows if not _in_bound(row)]
    problems += [f"{name} is not running after the faults" for name in gate.stack.dead()]
    assert len(rows) >= 5 and ledger.sent
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])


def _in_bound(row: Row) -> bool:
    return row.pause_s is not None and row.pause_s <= RESUMED_WITHIN_S
