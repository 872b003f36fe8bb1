"""Chaos: agents keep calling while services and servers are killed; guarantees 2 and 3 still hold.

The agents (``load_support.py``) read and write files in the sandbox, each call under its own
idempotency key, retried with the same key after a timeout; autonomy-1 writes wait for
``alice``'s approval. A few more call the example ledger's Python tools (``load_python.py``),
served by a worker process on a SQLite file of the test's own: journal postings (run alone),
refunds (two finance approvers vote) and order lookups. Meanwhile a schedule kills things, in
one of two stacks (in both, also the ledger's worker: SIGKILLed, every other time while a
write is at it, and started again):

- *single* (one nats-server, one redis-server): SIGKILLs and restarts the executor, the policy
  service, Redis (this module's Redis keeps nothing on disk: every restart is a total loss)
  and nats-server (same port, same JetStream store). Every other executor kill waits for a
  write's durable claim, so it lands while that write runs; every other NATS outage outlasts
  the clients' publish timeout, so submissions fail and are repeated.
- *cluster* (``effectgate up --cluster 3``: three NATS nodes, the bus at R3, Redis with a
  replica and three Sentinels, two replicas of every service): kills one executor or policy
  replica, a NATS node (every other time the record stream's leader) and restarts it after an
  outage, and the Redis primary (the Sentinels promote the replica; the old one comes back as
  a replica).

Then (``load_checks.py``): every submitted request has exactly one receipt (guarantee 2); no
effect ran twice, counted at the tool (guarantee 3) and in the ledger per idempotency key;
every ``uncertain`` receipt overlaps a kill that may cause one; succeeded writes left their
content, reads returned the file; every ``uncertain`` Python write is resolved by the
reconciler, ``ran`` matching an effect in the ledger and ``not_run`` none; the audit chain
verifies once audit has caught up, with no stream sequence missing.

``EFFECTGATE_CHAOS_S`` is the load's duration in seconds (default 60; the fault schedule scales
with it). Both stacks run by default, the cluster one for at most ``CLUSTER_CI_S`` (CI runs
it so); ``EFFECTGATE_CHAOS_CLUSTER=3`` runs only the cluster stack for the whole duration
(``./dev chaos --cluster 900``), ``=1`` only the single one. ``EFFECTGATE_CHAOS_SEED`` seeds
the random choices; the summary names the seed of each run. The summary is printed at the
run's end (the test's ``summary`` property, which the pytest plugin prints, also from an xdist
worker), recorded as the test's ``chaos`` property (JUnit XML) and kept with every request's
outcome and every fault's window in ``<state_dir>/chaos-report.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from effectgate.cli.stack.launch import SERVICES
from effectgate.cli.stack.readiness import wait_ready
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.devstack.testing import SUMMARY_PROPERTY
from effectgate.devstack.workers import WorkerProcess

from . import load_python
from .cluster_support import fail_over_redis, kill_node, leader, restart_node
from .ledger_support import attributes_toml, declare_worker
from .load_checks import (
    IN_MOVED_TO,
    audit_problems,
    effect_problems,
    read_problems,
    receipt_problems,
    uncertain_problems,
    write_report,
)
from .load_support import LOAD_DIR, OUTCOMES, Fault, Ledger, audit, background, collect, now, run_agent
from .support import Paths, make_tree

pytestmark = [pytest.mark.e2e, pytest.mark.fault, pytest.mark.chaos]

CHAOS_S = float(os.environ.get("EFFECTGATE_CHAOS_S", "60"))
SEED = int(os.environ.get("EFFECTGATE_CHAOS_SEED") or random.SystemRandom().randrange(2**32))
CLUSTER_CI_S = 60.0
"""The cluster stack's load when both stacks run (the default): CI stays bounded."""
ONLY = os.environ.get("EFFECTGATE_CHAOS_CLUSTER", "")
if ONLY not in ("", "1", "3"):
    raise pytest.UsageError(f"EFFECTGATE_CHAOS_CLUSTER must be 1 or 3, not {ONLY!r}")

AGENTS_PER_AUTONOMY = 16
FAULT_EVERY_S = 15.0
SINGLE_KINDS = ("executor", "policy", "redis", "nats", "worker")
CLUSTER_KINDS = ("executor", "policy", "node", "sentinel", "worker")
UNCERTAIN_CAUSES = {"executor", "nats", "redis", "node", "sentinel", "worker"}


@pytest.fixture(scope="module", params=[int(ONLY)] if ONLY else [1, 3], ids=lambda nodes: f"nodes{nodes}")
def stack_cluster(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture(scope="module")
def e2e_paths(stack_cluster: int, tmp_path_factory: pytest.TempPathFactory) -> Paths:
    """A sandbox and state directory of each stack's own (the audit database is not shared), and the ledger's worker."""
    paths = make_tree(tmp_path_factory.mktemp(f"e2e-nodes{stack_cluster}"))
    declare_worker(paths.principals)
    return paths


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Paths) -> dict[str, str]:
    attributes = e2e_paths.state.parent / "attributes.toml"
    attributes.write_text(attributes_toml(e2e_paths.principals.read_text()))
    return {
        "EFFECTGATE_EXECUTOR_BACKSTOP_UNDECIDED_S": "20",
        "EFFECTGATE_EXECUTOR_BACKSTOP_MARGIN_S": "5",
        "EFFECTGATE_EXECUTOR_STALE_GRACE_S": "5",
        "EFFECTGATE_APPROVALS_TTL_S": "60",
        "EFFECTGATE_POLICY_ATTRIBUTES_FILE": str(attributes),
        "EFFECTGATE_EXECUTOR_RECONCILE_BACKOFF_S": "0.5",
        "EFFECTGATE_EXECUTOR_RECONCILE_MAX_BACKOFF_S": "2",
    }


@pytest.fixture(scope="module")
def ledger_db(e2e_paths: Paths) -> Path:
    return e2e_paths.state.parent / "ledger.sqlite3"


@pytest.fixture(scope="module")
def ledger_worker(gate: Any, ledger_db: Path) -> Iterator[WorkerProcess]:
    worker = load_python.start_worker(gate, ledger_db)
    yield worker
    worker.stop()


@pytest_asyncio.fixture(scope="module")
async def served(gate: Any, ledger_worker: WorkerProcess) -> AsyncIterator[WorkerProcess]:
    await load_python.worker_ready(gate)
    yield ledger_worker


def _duration_s(clustered: bool) -> float:
    return min(CHAOS_S, CLUSTER_CI_S) if clustered and not ONLY else CHAOS_S


def _kinds(gate: Any) -> tuple[str, ...]:
    return CLUSTER_KINDS if gate.stack.cluster else SINGLE_KINDS


# --- faults -------------------------------------------------------------------------------


def _schedule(rng: random.Random, kinds: tuple[str, ...], load_s: float) -> list[tuple[float, str]]:
    """``(seconds into the load, kind)``: one fault per slot, each kind once per round, two rounds at least.

    Every other fault of a kind is its harder variant (a kill during a write, a long outage, the leader).
    """
    count = max(2 * len(kinds), round(load_s / FAULT_EVERY_S))
    slot_s = load_s / count
    chosen: list[str] = []
    while len(chosen) < count:
        chosen += rng.sample(kinds, len(kinds))
    return [(index * slot_s + rng.uniform(0.1, 0.5) * slot_s, kind) for index, kind in enumerate(chosen[:count])]


async def _kill_service(gate: Any, service: str, ledger: Ledger) -> None:
    """SIGKILL one process of ``service`` (a random replica in a cluster), restart it after a while."""
    name = ledger.rng.choice(gate.stack.replicas(service))
    gate.stack.stop(name, kill=True)
    await asyncio.sleep(ledger.rng.uniform(1.0, 3.0))  # down for a while; the dead process's pulls expire (1 s)
    gate.stack.start(service, name)
    await wait_ready(gate.stack, (service,))


async def _restart_redis(gate: Any, ledger: Ledger) -> None:
    server = gate.stack.servers["redis"]
    server.kill()
    await asyncio.sleep(ledger.rng.uniform(0.0, 2.0))
    await asyncio.to_thread(server.restart)  # empty: this module's Redis keeps nothing on disk


async def _restart_nats(gate: Any, ledger: Ledger) -> None:
    """Every other outage outlasts the clients' publish timeout (5 s): their submissions fail and are repeated."""
    server = gate.stack.servers["nats"]
    server.kill()
    long = sum(fault.kind == "nats" for fault in ledger.faults) % 2 == 0
    await asyncio.sleep(ledger.rng.uniform(6.0, 8.0) if long else ledger.rng.uniform(0.0, 2.0))
    await asyncio.to_thread(server.restart)
    await wait_ready(gate.stack, SERVICES)


async def _kill_node(gate: Any, ledger: Ledger) -> None:
    """Every other time the record stream's leader, else any node; down 1-8 s, then restarted and caught up."""
    nodes = list(gate.stack.cluster.nodes)
    aimed = sum(fault.kind == "node" for fault in ledger.faults) % 2 == 0
    name = leader(gate.stack, catalog.STREAM) if aimed else ledger.rng.choice(nodes)
    await kill_node(gate.stack, name)
    await asyncio.sleep(ledger.rng.uniform(1.0, 8.0))
    await restart_node(gate.stack, name, gate.js)


async def _fail_over_redis(gate: Any, ledger: Ledger) -> None:
    await fail_over_redis(gate.stack)


FAULTS: dict[str, Callable[[Any, Ledger], Awaitable[None]]] = {
    "executor": lambda gate, ledger: _kill_service(gate, "executor", ledger),
    "policy": lambda gate, ledger: _kill_service(gate, "policy", ledger),
    "redis": _restart_redis,
    "nats": _restart_nats,
    "node": _kill_node,
    "sentinel": _fail_over_redis,
}


async def _aim(gate: Any, kind: str, ledger: Ledger) -> None:
    """Every other executor kill waits for a write's durable claim, every other worker kill for a
    Python write at the worker, so that it lands while the write runs."""
    if kind not in ("executor", "worker") or sum(fault.kind == kind for fault in ledger.faults) % 2:
        return
    if kind == "worker":
        await load_python.write_at_worker(gate, FAULT_EVERY_S)
        return
    claimed = asyncio.Event()

    async def on_claim(_msg: Any) -> None:
        claimed.set()

    subscription = await gate.nc.subscribe(Subjects.CLAIMS, cb=on_claim)
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(claimed.wait(), timeout=FAULT_EVERY_S)
    finally:
        await subscription.unsubscribe()


async def _inject_faults(gate: Any, worker: WorkerProcess, ledger: Ledger, started: float, load_s: float) -> None:
    faults = {**FAULTS, "worker": lambda gate, ledger: load_python.kill_worker(gate, worker, ledger)}
    for at_s, kind in _schedule(ledger.rng, _kinds(gate), load_s):
        await asyncio.sleep(max(0.0, started + at_s - time.monotonic()))
        await _aim(gate, kind, ledger)
        began = now()
        await faults[kind](gate, ledger)
        ledger.faults.append(Fault(kind, began, now()))


async def _load(gate: Any, worker: WorkerProcess, ledger: Ledger, load_s: float) -> None:
    principals = [gate.agent(autonomy) for autonomy in (1, 2) for _ in range(AGENTS_PER_AUTONOMY)]
    python = [gate.agent(autonomy) for autonomy in (1, 2) for _ in range(load_python.AGENTS_PER_AUTONOMY)]
    for principal in principals + python:
        await gate.client(principal)
    started, stop = time.monotonic(), asyncio.Event()
    asyncio.get_running_loop().call_later(load_s, stop.set)
    async with asyncio.TaskGroup() as group:
        group.create_task(_inject_faults(gate, worker, ledger, started, load_s))
        for principal in principals:
            group.create_task(run_agent(gate, ledger, principal, stop))
        for principal in python:
            agent = run_agent(gate, ledger, principal, stop, load_python.next_call, pace_s=load_python.PACE_S)
            group.create_task(agent)


# --- reporting ----------------------------------------------------------------------------


def _summary(gate: Any, ledger: Ledger, moved: Counter[str], verified: dict[str, Any], load_s: float) -> str:
    outcomes = Counter(str(s.receipt.outcome) for s in ledger.sent if s.receipt)  # every tool's requests
    faults = Counter(f.kind for f in ledger.faults)
    calls = len(ledger.by_key())
    stack = f"cluster of {len(gate.stack.cluster.nodes)}" if gate.stack.cluster else "single"
    return (
        f"chaos ({stack}): {len(ledger.sent)} requests, {sum(s.copies for s in ledger.sent)} receipts "
        f"({', '.join(f'{o} {outcomes[o]}' for o in OUTCOMES)}), {sum(moved.values())} writes, "
        f"{sum(1 for runs in moved.values() if runs > 1)} double effects, {len(ledger.faults)} faults "
        f"({', '.join(f'{k} {faults[k]}' for k in _kinds(gate))}), "
        f"audit {'intact' if verified['ok'] else 'BROKEN'}: {verified['total']} records; "
        f"{calls} calls, {len(ledger.sent) - calls} retries with the same key, {ledger.approved} approvals given, "
        f"{ledger.resubmits} submissions repeated ({ledger.duplicates} already stored), "
        f"{load_s:g} s of load, seed {SEED}"
    )


def _reasons(ledger: Ledger) -> str:
    reasons = Counter(f"{s.receipt.outcome}/{s.receipt.reason_code}" for s in ledger.sent if s.receipt)
    return "chaos outcomes: " + ", ".join(f"{reason} {count}" for reason, count in sorted(reasons.items()))


# --- the test -----------------------------------------------------------------------------


@pytest.mark.timeout(int(CHAOS_S) + 480)
async def test_guarantees_hold_while_services_and_servers_are_killed(
    gate: Any, served: WorkerProcess, ledger_db: Path, watch: Any, record_property: Callable[[str, object], None]
) -> None:
    sandbox, load_s = gate.paths.sandbox, _duration_s(gate.stack.cluster is not None)
    (sandbox / LOAD_DIR).mkdir()
    watch.watch(sandbox / LOAD_DIR)
    ledger = Ledger(random.Random(SEED))

    async with background(gate, ledger, watch):
        await _load(gate, served, ledger, load_s)
        problems = await collect(gate, ledger)
        await load_python.await_resolutions(gate, ledger)
    verified = await audit(gate)
    moved = Counter(name for _, name, mask in watch.poll() if mask & IN_MOVED_TO)

    problems += receipt_problems(ledger) + effect_problems(sandbox, ledger, moved)
    problems += read_problems(sandbox, ledger) + uncertain_problems(ledger, UNCERTAIN_CAUSES)
    problems += load_python.python_problems(ledger, ledger_db) + audit_problems(verified)
    problems += [f"{name} is not running after the chaos" for name in gate.stack.dead()]
    problems += [] if served.process and served.process.poll() is None else ["the ledger's worker is not running"]
    report = gate.stack.state_dir / "chaos-report.json"
    lines = [_summary(gate, ledger, moved, verified, load_s), load_python.python_summary(ledger, ledger_db)]
    lines += [_reasons(ledger), f"chaos report: {report}"]
    write_report(report, lines, ledger, problems, {"reconciler": load_python.reconciler_counts(ledger)})
    record_property("chaos", lines[0])
    record_property(SUMMARY_PROPERTY, "\n".join(lines))  # printed at the run's end, also from an xdist worker
    assert ledger.faults and ledger.sent, "no chaos happened"
    assert not problems, f"{len(problems)} problems (all in {report}):\n" + "\n".join(problems[:30])
