"""The chaos load's Python tool calls (the example ledger's), the worker's kill, and what is checked after.

Ledger agents call ``journal.post`` (autonomy 2: runs alone; it takes up to ``HOLD_S``, as a slow
target would), ``refunds.refund`` (autonomy 1: two finance approvers vote) and ``lookup_order``
(reads), each call under its own idempotency key, on a SQLite file of the test's own. Both writes
declare a reconcile step, so every ``uncertain`` receipt of one gets the reconciler's resolution.

Checked against the target's truth (the ledger file, rows keyed ``<principal>:<idempotency key>``):
at most one effect per key; a succeeded write left exactly one (a refund's id is its receipt's
target effect id), a write that ended without a run left none; every ``uncertain`` write is
resolved within ``RESOLVED_WITHIN_S`` after the load (else it is counted as left), ``ran`` by the
reconciler matching a row (and a refund's id) and ``not_run`` matching none; a read returned its order.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from effectgate.contracts.tools.hosting import WorkerSubjects
from effectgate.devstack.workers import WorkerProcess, worker_alive

from .ledger_support import MODULE, TOOLS, WORKER, last_resolution, publish, rows, seed_orders, tool_state, worker_env
from .load_support import Call, Ledger, Sent

AGENTS_PER_AUTONOMY = 3
"""Ledger agents of each autonomy: 2 posts in the journal, 1 asks for refunds."""
PACE_S = 4.0
"""Least time between two submissions of one ledger agent (the ledger's tools have no rate limit)."""
WRITE_SHARE = 0.7
HOLD_S = 2.0
"""Longest time a posting takes (``journal.post``'s ``hold_s``)."""
MAX_REFUND = 50.0
ORDERS = [(f"ORD-C{index}", "chaos", 1_000_000.0) for index in range(1, 9)]
"""The ledger's orders: large enough that no refund of the load is refused."""
RECONCILED = {("journal", "post"), ("refunds", "refund")}
"""The load's writes, each with a reconcile step."""
RESOLVED_WITHIN_S = 60.0
"""After the last receipt: time for the reconciler to resolve every ``uncertain`` write."""
ENDED_WITHOUT_RUN = {"denied", "failed", "refused"}
_EFFECTS = {
    "journal": "SELECT call_key, NULL FROM journal",
    "refunds": "SELECT call_key, refund_id FROM refunds",
}


def next_call(ledger: Ledger, principal: str) -> Call:
    """A ledger agent's next call: mostly its write (a posting at autonomy 2, else a refund), else a lookup."""
    key, rng = uuid.uuid4().hex, ledger.rng
    order = rng.choice(ORDERS)[0]
    if rng.random() >= WRITE_SHARE:
        return Call(principal, "lookup_order", {"order_id": order}, key, tool="lookup_order")
    if principal.startswith("a2-"):
        arguments: dict[str, Any] = {"account": principal, "memo": key, "hold_s": round(rng.uniform(0, HOLD_S), 2)}
        return Call(principal, "post", arguments, key, tool="journal")
    amount = round(rng.uniform(1, MAX_REFUND), 2)
    return Call(principal, "refund", {"order_id": order, "amount": amount}, key, tool="refunds")


# --- the worker and its fault ------------------------------------------------------------


def start_worker(gate: Any, ledger_db: Path) -> WorkerProcess:
    """The ledger's tools published (the CLI), its orders in ``ledger_db`` and its worker started on it."""
    publish(gate)
    seed_orders(ledger_db, ORDERS)
    log = gate.stack.state_dir / "logs" / "worker-ledger.log"
    worker = WorkerProcess(MODULE, WORKER, worker_env(gate, ledger_db), log)
    worker.start()
    return worker


async def worker_ready(gate: Any) -> None:
    """Wait until the worker has announced itself and the registry holds each of its tools ``ready``."""
    await worker_alive(gate.nc, WORKER, timeout_s=60.0)
    for tool in TOOLS:
        await tool_state(gate, tool, "ready")


async def kill_worker(gate: Any, worker: WorkerProcess, ledger: Ledger) -> None:
    """SIGKILL the ledger's worker, start it again after a while, until it announces itself."""
    worker.kill()
    await asyncio.sleep(ledger.rng.uniform(1.0, 3.0))
    worker.start()
    await worker_alive(gate.nc, WORKER, timeout_s=60.0)


async def write_at_worker(gate: Any, timeout_s: float) -> None:
    """Return once a write reaches the worker (a copy of its call), or after ``timeout_s``."""
    arrived = asyncio.Event()

    async def on_call(_msg: Any) -> None:
        arrived.set()

    subscriptions = [await gate.nc.subscribe(WorkerSubjects.call(WORKER, tool), cb=on_call) for tool, _ in RECONCILED]
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(arrived.wait(), timeout=timeout_s)
    finally:
        for subscription in subscriptions:
            await subscription.unsubscribe()


# --- after the load -----------------------------------------------------------------------


def uncertain_writes(ledger: Ledger) -> list[Sent]:
    """Every request of a write with a reconcile step whose receipt is ``uncertain``."""
    return [
        s
        for s in ledger.sent
        if s.receipt and s.receipt.outcome == "uncertain" and (s.call.tool, s.call.operation) in RECONCILED
    ]


async def await_resolutions(gate: Any, ledger: Ledger) -> None:
    """Read each uncertain write's last resolution, waiting up to ``RESOLVED_WITHIN_S`` for ``ran`` / ``not_run``."""
    deadline = time.monotonic() + RESOLVED_WITHIN_S
    for sent in uncertain_writes(ledger):
        while True:
            sent.resolution = await last_resolution(gate, sent.call.principal, sent.request_id)
            if sent.resolution and sent.resolution.resolution != "unknown" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)


def reconciler_counts(ledger: Ledger) -> dict[str, int]:
    """``uncertain_found``, ``ran``, ``not_run`` (the reconciler's resolutions) and ``left`` (none of those)."""
    found = uncertain_writes(ledger)
    by = Counter(s.resolution.resolution for s in found if s.resolution and s.resolution.resolved_by == "reconciler")
    return {"uncertain_found": len(found), "ran": by["ran"], "not_run": by["not_run"]} | {
        "left": len(found) - by["ran"] - by["not_run"]
    }


def effects(ledger_db: Path) -> dict[str, dict[str, list[object]]]:
    """Per tool, each call key's effects in the ledger (a refund's id, ``None`` for a posting)."""
    found: dict[str, dict[str, list[object]]] = {}
    for tool, sql in _EFFECTS.items():
        for key, effect_id in rows(ledger_db, sql):
            found.setdefault(tool, {}).setdefault(str(key), []).append(effect_id)
    return found


def python_problems(ledger: Ledger, ledger_db: Path) -> list[str]:
    """Every way the ledger's truth disagrees with the receipts, the resolutions and the reads."""
    found = effects(ledger_db)
    problems: list[str] = []
    for sents in ledger.by_key().values():
        call = sents[0].call
        if (call.tool, call.operation) in RECONCILED:
            problems += _write_problems(sents, found.get(call.tool, {}).get(call.call_key, []))
    made = {s.call.call_key for s in ledger.sent}
    strangers = sorted(key for by_key in found.values() for key in by_key if key not in made)
    problems += [f"the ledger holds an effect of {key}, which no call made" for key in strangers]
    return problems + _read_problems(ledger) + _resolution_problems(ledger, found)


def _write_problems(sents: list[Sent], made: list[object]) -> list[str]:
    outcomes = {s.receipt.outcome for s in sents if s.receipt}
    call = sents[0].call
    where = f"{call.what} of {call.call_key} (requests {[s.request_id for s in sents]}: {sorted(outcomes)})"
    problems = [f"{where} has {len(made)} effects in the ledger"] if len(made) > 1 else []
    if "succeeded" in outcomes and len(made) != 1:
        problems.append(f"{where} succeeded but has {len(made)} effects in the ledger")
    for issued in (s.receipt for s in sents if s.receipt and s.receipt.outcome == "succeeded"):
        if made and made[0] not in (None, issued.target_effect_id):
            problems.append(f"{where}: its receipt names effect {issued.target_effect_id}, the ledger {made[0]}")
    if outcomes and outcomes <= ENDED_WITHOUT_RUN and made:
        problems.append(f"{where} ended without a run, yet has {len(made)} effects in the ledger")
    return problems


def _read_problems(ledger: Ledger) -> list[str]:
    orders = {order_id: total for order_id, _, total in ORDERS}
    return [
        f"{s.request_id} looked up {s.call.arguments['order_id']} as {s.receipt.result!r}"
        for s in ledger.sent
        if s.call.tool == "lookup_order" and s.receipt and "succeeded" in (s.receipt.outcome, s.receipt.replay_outcome)
        if not isinstance(s.receipt.result, dict)
        or (s.receipt.result.get("order_id"), s.receipt.result.get("total"))
        != (s.call.arguments["order_id"], orders[s.call.arguments["order_id"]])
    ]


def _resolution_problems(ledger: Ledger, found: dict[str, dict[str, list[object]]]) -> list[str]:
    problems = []
    for s in uncertain_writes(ledger):
        where, resolved = f"{s.call.principal}/{s.request_id} ({s.call.what}, uncertain)", s.resolution
        made = found.get(s.call.tool, {}).get(s.call.call_key, [])
        if resolved is None or resolved.resolution == "unknown" or resolved.resolved_by != "reconciler":
            note = f"{resolved.resolution} by {resolved.resolved_by}: {resolved.note}" if resolved else "none"
            problems.append(f"{where} left unresolved {RESOLVED_WITHIN_S:g} s after the load (resolution: {note})")
        elif (resolved.resolution == "ran") != bool(made):
            problems.append(f"{where} resolved {resolved.resolution}, the ledger holds {len(made)} effects of it")
        elif made and made[0] is not None and resolved.effect_id != made[0]:
            problems.append(f"{where} resolved ran with effect {resolved.effect_id}, the ledger's is {made[0]}")
    return problems


def python_summary(ledger: Ledger, ledger_db: Path) -> str:
    """One line: the Python tool requests, their effects, and the reconciler's counts."""
    requests = Counter(s.call.what for s in ledger.sent if s.call.tool != "file_system")
    uncertain = Counter(s.call.what for s in uncertain_writes(ledger))
    made = effects(ledger_db)
    count = sum(len(v) for by_key in made.values() for v in by_key.values())
    doubles = sum(len(v) > 1 for by_key in made.values() for v in by_key.values())
    counts = reconciler_counts(ledger)
    return (
        f"chaos python tools: {sum(requests.values())} requests "
        f"({', '.join(f'{what} {n}' for what, n in sorted(requests.items()))}), "
        f"{sum(uncertain.values())} uncertain ({', '.join(f'{w} {n}' for w, n in sorted(uncertain.items())) or '-'}), "
        f"{count} effects in the ledger, {doubles} double effects; "
        f"reconciler: {counts['uncertain_found']} uncertain found, {counts['ran']} resolved ran, "
        f"{counts['not_run']} resolved not run, {counts['left']} left"
    )
