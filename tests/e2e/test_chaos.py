"""Chaos: agents keep calling while services and servers are killed; guarantees 2 and 3 still hold.

Concurrent agents read and write files in the sandbox, each call under its own idempotency
key, retried with the same key and arguments after a timeout (a submit that fails during a
NATS outage is retried with the same request id). Autonomy-2 agents write directly,
autonomy-1 agents' writes wait for an approval that a background approver (``alice``)
gives. Meanwhile a schedule SIGKILLs and restarts the executor, the policy service, Redis
(this module's Redis keeps nothing on disk: every restart is a total loss) and nats-server
(same port, same JetStream store). Every other executor kill waits for a write's durable
claim, so it lands while that write runs; every other NATS outage outlasts the clients'
publish timeout, so submissions fail and are repeated. Then:

- every submitted request has exactly one receipt (guarantee 2);
- no effect ran twice, counted at the tool: each write replaces its own file with a unique
  content, and inotify counts the replaces (guarantee 3);
- every ``uncertain`` receipt overlaps a kill of the executor or NATS, or a Redis restart;
- succeeded writes left their content, succeeded and replayed reads returned the file;
- the audit chain verifies once audit has caught up, with no stream sequence missing.

``TOOLGATE_CHAOS_S`` is the load's duration in seconds (default 120; the fault schedule
scales with it); ``TOOLGATE_CHAOS_SEED`` seeds the random choices (fault kinds and times,
outages, calls), the summary names the seed of each run. The summary is printed past pytest's
output capture (``capsys.disabled()``), recorded as the test's ``chaos`` property (JUnit XML)
and kept with every request's outcome and every fault's window in
``<state_dir>/chaos-report.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats.errors
import pytest

from toolgate.cli.readiness import wait_ready
from toolgate.cli.stack import SERVICES
from toolgate.contracts.catalog import Rpc, Subjects
from toolgate.contracts.events import ReceiptIssued
from toolgate.sdk.client import DuplicateRequest, ToolClient

pytestmark = [pytest.mark.e2e, pytest.mark.fault, pytest.mark.chaos]

CHAOS_S = float(os.environ.get("TOOLGATE_CHAOS_S", "120"))
SEED = int(os.environ.get("TOOLGATE_CHAOS_SEED") or random.SystemRandom().randrange(2**32))

AGENTS_PER_AUTONOMY = 16
PACE_S = 12.5
"""Least time between two submissions of one principal: the file_system limit is 5 calls per
60 s (GCRA, one every 12 s after the burst), retries included."""
PATIENCE_S = 8.0
"""How long an agent waits for a receipt before it retries the call."""
IMPATIENT = 0.15
"""Share of calls retried without waiting for their receipt (a client that gave up at once)."""
ATTEMPTS = 3
"""Submissions of one call at most (new request id, same key and arguments)."""
WRITE_SHARE = 0.5
SUBMIT_TRIES = 60
"""Submissions of one request id while the stream does not confirm it, one second apart."""
FAULT_EVERY_S = 15.0
RECEIPTS_WITHIN_S = 150.0
"""After the load: time for the last requests to end, the backstop's included."""
APPROVER = "alice"
CHAOS_DIR = "chaos"
IN_MOVED_TO = 0x80
WRITE_ENDED_WITHOUT_RUN = {"denied", "failed", "refused"}
UNCERTAIN_CAUSES = {"executor", "nats", "redis"}
OUTCOMES = ("succeeded", "replayed", "uncertain", "failed", "denied", "refused")
FAULT_KINDS = ("executor", "policy", "redis", "nats")


@pytest.fixture(scope="module")
def stack_env() -> dict[str, str]:
    return {
        "TOOLGATE_EXECUTOR_BACKSTOP_UNDECIDED_S": "20",
        "TOOLGATE_EXECUTOR_BACKSTOP_MARGIN_S": "5",
        "TOOLGATE_EXECUTOR_STALE_GRACE_S": "5",
        "TOOLGATE_APPROVALS_TTL_S": "60",
    }


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Call:
    """One logical call: its retries reuse the operation, the arguments and the idempotency key."""

    principal: str
    operation: str
    arguments: dict[str, str]
    key: str

    @property
    def path(self) -> str:
        return self.arguments["path"]


@dataclass
class Sent:
    """One submitted request: its window runs from submission to its receipt's ``occurred_at``."""

    call: Call
    request_id: str
    submitted: datetime
    receipt: ReceiptIssued | None = None
    copies: int = 0
    """Receipts stored on its subject."""


@dataclass(frozen=True)
class Fault:
    """One kill: from the SIGKILL until the restarted service or server is ready again."""

    kind: str
    start: datetime
    end: datetime


@dataclass
class Ledger:
    """Everything the agents sent and every fault injected, for the checks afterwards."""

    rng: random.Random
    sent: list[Sent] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    readable: list[str] = field(default_factory=list)
    """Files whose write succeeded: written once, never changed, so a read must return them."""
    approved: int = 0
    resubmits: int = 0
    """Submissions repeated under the same request id (the stream had not confirmed)."""
    duplicates: int = 0
    """Of those, the ones the stream had stored after all (:class:`DuplicateRequest`)."""

    def next_call(self, principal: str) -> Call:
        key = uuid.uuid4().hex
        if self.rng.random() < WRITE_SHARE:
            arguments = {"path": f"{CHAOS_DIR}/{key}.txt", "content": f"{principal} wrote {key}\n"}
            return Call(principal, "write", arguments, key)
        path = self.rng.choice(self.readable) if self.readable else "hello.txt"
        return Call(principal, "read", {"path": path}, key)

    def record(self, call: Call) -> Sent:
        sent = Sent(call, uuid.uuid4().hex, _now())
        self.sent.append(sent)
        return sent

    def by_key(self) -> dict[str, list[Sent]]:
        grouped: dict[str, list[Sent]] = {}
        for sent in self.sent:
            grouped.setdefault(sent.call.key, []).append(sent)
        return grouped


# --- agents -------------------------------------------------------------------------------


class Pace:
    """Keeps one principal under its rate limit; never waits past the end of the load."""

    def __init__(self, rng: random.Random, until: float) -> None:
        self._next, self._until = time.monotonic() + rng.uniform(0, PACE_S), until

    async def wait(self) -> bool:
        """Wait for the next slot; ``False`` when the load is over."""
        await asyncio.sleep(max(0.0, min(self._next, self._until) - time.monotonic()))
        self._next = time.monotonic() + PACE_S
        return time.monotonic() < self._until


async def _agent(gate: Any, ledger: Ledger, principal: str, until: float) -> None:
    client, pace = await gate.client(principal), Pace(ledger.rng, until)
    while time.monotonic() < until:
        await _call(client, ledger, ledger.next_call(principal), pace)


async def _call(client: ToolClient, ledger: Ledger, call: Call, pace: Pace) -> None:
    """Submit ``call``, retrying with a new request id (same key and arguments) while no receipt comes."""
    for _ in range(ATTEMPTS):
        if not await pace.wait():
            return
        sent = await _submit(client, ledger, call)
        patience_s = 0.0 if ledger.rng.random() < IMPATIENT else PATIENCE_S
        with contextlib.suppress(TimeoutError):
            issued = await client.receipt(sent.request_id, timeout_s=patience_s)
            if call.operation == "write" and issued.outcome == "succeeded":
                ledger.readable.append(call.path)
            return


async def _submit(client: ToolClient, ledger: Ledger, call: Call) -> Sent:
    """Submit one request; while the stream does not confirm it, again with the same request id."""
    sent = ledger.record(call)
    for _ in range(SUBMIT_TRIES):
        try:
            await client.submit(
                "file_system", call.operation, call.arguments, idempotency_key=call.key, request_id=sent.request_id
            )
            return sent
        except DuplicateRequest:  # an earlier try was stored after all
            ledger.duplicates += 1
            return sent
        except (nats.errors.Error, TimeoutError):
            ledger.resubmits += 1
            await asyncio.sleep(1.0)
    raise AssertionError(f"{call.principal}/{sent.request_id}: the stream never confirmed the request")


async def _approve_pending(gate: Any, ledger: Ledger) -> None:
    """Approve every pending approval as ``alice``, through Redis losses and NATS restarts."""
    while True:
        with contextlib.suppress(nats.errors.Error, TimeoutError):
            listed = await gate.approvals()
            for item in listed if isinstance(listed, list) else []:
                if (await gate.decide(APPROVER, item["approval_id"])).get("ok"):
                    ledger.approved += 1
        await asyncio.sleep(0.5)


async def _drain_inotify(watch: Any) -> None:
    """Read inotify events as they come, so the kernel queue never overflows."""
    while True:
        watch.poll()
        await asyncio.sleep(1.0)


# --- faults -------------------------------------------------------------------------------


def _schedule(rng: random.Random) -> list[tuple[float, str]]:
    """``(seconds into the load, kind)``: one fault per slot, each kind once per round of four."""
    count = max(len(FAULT_KINDS), round(CHAOS_S / FAULT_EVERY_S))
    slot_s = CHAOS_S / count
    kinds: list[str] = []
    while len(kinds) < count:
        kinds += rng.sample(FAULT_KINDS, len(FAULT_KINDS))
    return [(index * slot_s + rng.uniform(0.1, 0.5) * slot_s, kind) for index, kind in enumerate(kinds[:count])]


async def _kill_service(gate: Any, name: str, ledger: Ledger) -> None:
    gate.stack.stop(name, kill=True)
    await asyncio.sleep(ledger.rng.uniform(1.0, 3.0))  # down for a while; the dead process's pulls expire (1 s)
    gate.stack.start(name)
    await wait_ready(gate.stack, (name,))


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


FAULTS: dict[str, Callable[[Any, Ledger], Awaitable[None]]] = {
    "executor": lambda gate, ledger: _kill_service(gate, "executor", ledger),
    "policy": lambda gate, ledger: _kill_service(gate, "policy", ledger),
    "redis": _restart_redis,
    "nats": _restart_nats,
}


async def _aim(gate: Any, kind: str, ledger: Ledger) -> None:
    """Every other executor kill waits for a write's durable claim, so that it lands while the write runs."""
    if kind != "executor" or sum(fault.kind == "executor" for fault in ledger.faults) % 2:
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


async def _inject_faults(gate: Any, ledger: Ledger, started: float) -> None:
    for at_s, kind in _schedule(ledger.rng):
        await asyncio.sleep(max(0.0, started + at_s - time.monotonic()))
        await _aim(gate, kind, ledger)
        began = _now()
        await FAULTS[kind](gate, ledger)
        ledger.faults.append(Fault(kind, began, _now()))


# --- running ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _background(gate: Any, ledger: Ledger, watch: Any) -> AsyncIterator[None]:
    """The approver and the inotify reader, until the block ends."""
    await gate.approver(APPROVER)
    await gate.approvals()  # the operator's connection, opened before any outage
    tasks = [asyncio.create_task(_approve_pending(gate, ledger)), asyncio.create_task(_drain_inotify(watch))]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        ended = await asyncio.gather(*tasks, return_exceptions=True)
    if failed := [error for error in ended if not isinstance(error, asyncio.CancelledError)]:
        raise failed[0]  # the approver or the inotify reader stopped on its own


async def _load(gate: Any, ledger: Ledger) -> None:
    principals = [gate.agent(autonomy) for autonomy in (1, 2) for _ in range(AGENTS_PER_AUTONOMY)]
    for principal in principals:
        await gate.client(principal)
    started = time.monotonic()
    until = started + CHAOS_S
    async with asyncio.TaskGroup() as group:
        group.create_task(_inject_faults(gate, ledger, started))
        for principal in principals:
            group.create_task(_agent(gate, ledger, principal, until))


async def _collect(gate: Any, ledger: Ledger) -> list[str]:
    """Every request's receipt (waiting as long as the backstop needs), then how many each has."""
    deadline = time.monotonic() + RECEIPTS_WITHIN_S
    for sent in ledger.sent:
        with contextlib.suppress(TimeoutError):
            left_s = max(0.1, deadline - time.monotonic())
            sent.receipt = await gate.receipt(sent.call.principal, sent.request_id, timeout_s=left_s)
    try:
        await gate.settle(timeout_s=60)  # a second receipt, if any, is published by now
        problems = []
    except TimeoutError as error:
        problems = [f"after the last receipt: {error}"]
    for sent in ledger.sent:
        sent.copies = await gate.count(Subjects.receipt(sent.call.principal, sent.request_id))
    return problems


async def _audit(gate: Any, timeout_s: float = 120.0) -> dict[str, Any]:
    """``tg.audit.verify`` once audit has caught up with the stream."""
    deadline = time.monotonic() + timeout_s
    while True:
        verified: dict[str, Any] = await gate.rpc(Rpc.AUDIT_VERIFY, {}, timeout_s=60)
        if (verified["audited_last_seq"] or 0) >= (verified["stream_last_seq"] or 0):
            return verified
        if time.monotonic() > deadline:
            return verified
        await asyncio.sleep(1.0)


# --- checks -------------------------------------------------------------------------------


def _receipt_problems(ledger: Ledger) -> list[str]:
    return [
        f"{s.call.principal}/{s.request_id} ({s.call.operation}): {s.copies} receipts"
        for s in ledger.sent
        if s.copies != 1 or s.receipt is None
    ]


def _effect_problems(sandbox: Path, ledger: Ledger, moved: Counter[str]) -> list[str]:
    problems = []
    for sents in ledger.by_key().values():
        call = sents[0].call
        if call.operation == "write":
            problems += _write_problems(sandbox, call, sents, moved[Path(call.path).name])
        problems += _replay_problems(sents)
    strangers = set(moved) - {Path(s.call.path).name for s in ledger.sent if s.call.operation == "write"}
    return problems + [f"{name} was written though no call wrote it" for name in sorted(strangers)]


def _replay_problems(sents: list[Sent]) -> list[str]:
    """A replay answers with a receipt of the same key."""
    ids = {s.request_id for s in sents}
    replays = [s.receipt for s in sents if s.receipt and s.receipt.outcome == "replayed"]
    return [
        f"{r.request_id} replays {r.replay_of}, not a request of its key" for r in replays if r.replay_of not in ids
    ]


def _write_problems(sandbox: Path, call: Call, sents: list[Sent], runs: int) -> list[str]:
    outcomes = {s.receipt.outcome for s in sents if s.receipt}
    file = sandbox / call.path
    found = file.read_text() if file.exists() else None
    where = f"{call.path} (requests {', '.join(s.request_id for s in sents)}: {sorted(outcomes)})"
    problems = [f"{where} was written {runs} times"] if runs > 1 else []
    if found is not None and found != call.arguments["content"]:
        problems.append(f"{where} holds {found!r}")
    if "succeeded" in outcomes and (runs != 1 or found is None):
        problems.append(f"{where} succeeded but was written {runs} times, file {'present' if found else 'missing'}")
    if outcomes and outcomes <= WRITE_ENDED_WITHOUT_RUN and (runs or found is not None):
        problems.append(f"{where} ended without a run, yet was written {runs} times")
    return problems


def _read_problems(sandbox: Path, ledger: Ledger) -> list[str]:
    problems = []
    for sent in ledger.sent:
        issued = sent.receipt
        if sent.call.operation != "read" or issued is None or issued.outcome not in ("succeeded", "replayed"):
            continue
        expected = (sandbox / sent.call.path).read_text()
        if not isinstance(issued.result, dict) or issued.result.get("content") != expected:
            problems.append(f"{sent.request_id} read {sent.call.path} as {issued.result!r}, the file is {expected!r}")
    return problems


def _explained(sent: Sent, faults: list[Fault]) -> bool:
    assert sent.receipt is not None
    ended = sent.receipt.occurred_at
    return any(f.kind in UNCERTAIN_CAUSES and f.start <= ended and sent.submitted <= f.end for f in faults)


def _uncertain_problems(ledger: Ledger) -> list[str]:
    return [
        f"{s.call.principal}/{s.request_id} ({s.call.operation} {s.call.path}) ended uncertain "
        f"({s.receipt.reason_code}) between {s.submitted:%H:%M:%S.%f} and {s.receipt.occurred_at:%H:%M:%S.%f}, "
        "overlapping no executor kill, NATS kill or Redis restart"
        for s in ledger.sent
        if s.receipt and s.receipt.outcome == "uncertain" and not _explained(s, ledger.faults)
    ]


def _audit_problems(verified: dict[str, Any]) -> list[str]:
    problems = [] if verified["ok"] else [f"audit verify failed: {verified['result']}"]
    if verified["missing_stream_seqs"]:
        problems.append(f"stream sequences missing from audit: {verified['missing_stream_seqs']}")
    if (verified["audited_last_seq"] or 0) < (verified["stream_last_seq"] or 0):
        problems.append(f"audit never caught up: {verified['audited_last_seq']} < {verified['stream_last_seq']}")
    return problems


# --- reporting ----------------------------------------------------------------------------


def _summary(ledger: Ledger, moved: Counter[str], verified: dict[str, Any]) -> str:
    outcomes = Counter(s.receipt.outcome for s in ledger.sent if s.receipt)
    faults = Counter(f.kind for f in ledger.faults)
    calls = len(ledger.by_key())
    return (
        f"chaos: {len(ledger.sent)} requests, {sum(s.copies for s in ledger.sent)} receipts "
        f"({', '.join(f'{o} {outcomes[o]}' for o in OUTCOMES)}), {sum(moved.values())} writes, "
        f"{sum(1 for runs in moved.values() if runs > 1)} double effects, {len(ledger.faults)} faults "
        f"({', '.join(f'{k} {faults[k]}' for k in FAULT_KINDS)}), "
        f"audit {'intact' if verified['ok'] else 'BROKEN'}: {verified['total']} records; "
        f"{calls} calls, {len(ledger.sent) - calls} retries with the same key, {ledger.approved} approvals given, "
        f"{ledger.resubmits} submissions repeated ({ledger.duplicates} already stored), "
        f"{CHAOS_S:g} s of load, seed {SEED}"
    )


def _reasons(ledger: Ledger) -> str:
    reasons = Counter(f"{s.receipt.outcome}/{s.receipt.reason_code}" for s in ledger.sent if s.receipt)
    return "chaos outcomes: " + ", ".join(f"{reason} {count}" for reason, count in sorted(reasons.items()))


def _write_report(path: Path, lines: list[str], ledger: Ledger, problems: list[str]) -> None:
    requests = [
        {
            "principal": s.call.principal,
            "request_id": s.request_id,
            "operation": s.call.operation,
            "path": s.call.path,
            "key": s.call.key,
            "submitted": s.submitted.isoformat(),
            "receipts": s.copies,
            "outcome": s.receipt.outcome if s.receipt else None,
            "reason_code": s.receipt.reason_code if s.receipt else None,
            "reason": s.receipt.reason if s.receipt else None,
            "ended": s.receipt.occurred_at.isoformat() if s.receipt else None,
        }
        for s in ledger.sent
    ]
    faults = [{"kind": f.kind, "start": f.start.isoformat(), "end": f.end.isoformat()} for f in ledger.faults]
    report = {"summary": lines, "problems": problems, "faults": faults, "requests": requests}
    path.write_text(json.dumps(report, indent=1))


# --- the test -----------------------------------------------------------------------------


@pytest.mark.timeout(int(CHAOS_S) + 420)
async def test_guarantees_hold_while_services_and_servers_are_killed(
    gate: Any, watch: Any, capsys: pytest.CaptureFixture[str], record_property: Callable[[str, object], None]
) -> None:
    sandbox = gate.paths.sandbox
    (sandbox / CHAOS_DIR).mkdir()
    watch.watch(sandbox / CHAOS_DIR)
    ledger = Ledger(random.Random(SEED))

    async with _background(gate, ledger, watch):
        await _load(gate, ledger)
        problems = await _collect(gate, ledger)
    verified = await _audit(gate)
    moved = Counter(name for _, name, mask in watch.poll() if mask & IN_MOVED_TO)

    problems += _receipt_problems(ledger) + _effect_problems(sandbox, ledger, moved)
    problems += _read_problems(sandbox, ledger) + _uncertain_problems(ledger) + _audit_problems(verified)
    problems += [f"{name} is not running after the chaos" for name in gate.stack.dead()]
    report = gate.stack.state_dir / "chaos-report.json"
    lines = [_summary(ledger, moved, verified), _reasons(ledger), f"chaos report: {report}"]
    _write_report(report, lines, ledger, problems)
    record_property("chaos", lines[0])
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert ledger.faults and ledger.sent, "no chaos happened"
    assert not problems, f"{len(problems)} problems (all in {report}):\n" + "\n".join(problems[:30])
