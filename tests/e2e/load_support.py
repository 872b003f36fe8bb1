"""The agents of the fault tests: calls under idempotency keys, retried through outages, and their ledger.

Concurrent agents read and write files in the sandbox, each call under its own idempotency
key, retried with the same key and arguments after a timeout (a submit that fails during a
NATS outage is retried with the same request id). Autonomy-2 agents write directly,
autonomy-1 agents' writes wait for an approval that a background approver (``alice``) gives;
a call of another tool (``load_python.py``: the ledger's) comes from a ``next_call`` of its
own, and a refund's approval gets the votes of both finance approvers.
Used by ``test_chaos.py`` and ``test_cluster_faults.py``; the checks are in ``load_checks.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import nats.errors

from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.events import ReceiptIssued, UncertainResolved
from effectgate.sdk import DuplicateRequest, RegistryUnavailable, ToolClient

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
RECEIPTS_WITHIN_S = 150.0
"""After the load: time for the last requests to end, the backstop's included."""
APPROVER = "alice"
FINANCE = ("dora", "erin")
"""Who votes on an approval of the ``finance`` role (its quorum is two)."""
LOAD_DIR = "chaos"
OUTCOMES = ("succeeded", "replayed", "uncertain", "failed", "denied", "refused")


def now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Call:
    """One logical call: its retries reuse the operation, the arguments and the idempotency key."""

    principal: str
    operation: str
    arguments: dict[str, Any]
    key: str
    tool: str = "file_system"

    @property
    def path(self) -> str:
        """The file of a ``file_system`` call."""
        return str(self.arguments["path"])

    @property
    def what(self) -> str:
        """``<operation> <path>`` of a file call, ``<tool>.<operation>`` of another."""
        return f"{self.operation} {self.path}" if self.tool == "file_system" else f"{self.tool}.{self.operation}"

    @property
    def call_key(self) -> str:
        """``<principal>:<idempotency key>``: what the ledger records a Python write under."""
        return f"{self.principal}:{self.key}"


@dataclass
class Sent:
    """One submitted request: its window runs from submission to its receipt's ``occurred_at``."""

    call: Call
    request_id: str
    submitted: datetime
    receipt: ReceiptIssued | None = None
    copies: int = 0
    """Receipts stored on its subject."""
    received: float | None = None
    """``time.monotonic()`` when the agent got its receipt (``None``: it stopped waiting first)."""
    resolution: UncertainResolved | None = None
    """An ``uncertain`` receipt's last resolution, when one was read."""


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
            arguments = {"path": f"{LOAD_DIR}/{key}.txt", "content": f"{principal} wrote {key}\n"}
            return Call(principal, "write", arguments, key)
        path = self.rng.choice(self.readable) if self.readable else "hello.txt"
        return Call(principal, "read", {"path": path}, key)

    def record(self, call: Call) -> Sent:
        sent = Sent(call, uuid.uuid4().hex, now())
        self.sent.append(sent)
        return sent

    def by_key(self) -> dict[str, list[Sent]]:
        grouped: dict[str, list[Sent]] = {}
        for sent in self.sent:
            grouped.setdefault(sent.call.key, []).append(sent)
        return grouped


# --- agents -------------------------------------------------------------------------------


class Pace:
    """One submission of a principal per ``pace_s`` (under its rate limit); never waits past the end of the load."""

    def __init__(self, rng: random.Random, stop: asyncio.Event, pace_s: float = PACE_S) -> None:
        self._next, self._stop, self._pace_s = time.monotonic() + rng.uniform(0, pace_s), stop, pace_s

    async def wait(self) -> bool:
        """Wait for the next slot; ``False`` when the load is over (``stop`` is set)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), max(0.0, self._next - time.monotonic()))
        self._next = time.monotonic() + self._pace_s
        return not self._stop.is_set()


NextCall = Callable[[Ledger, str], Call]
"""What a principal calls next: ``(ledger, principal) -> Call``."""


async def run_agent(
    gate: Any, ledger: Ledger, principal: str, stop: asyncio.Event, next_call: NextCall | None = None, **pace: float
) -> None:
    """Call as ``principal`` until ``stop`` is set, each call retried as :func:`make_call` does.

    ``next_call`` (default :meth:`Ledger.next_call`) picks each call; ``pace`` may give ``pace_s``.
    """
    client, paced = await gate.client(principal), Pace(ledger.rng, stop, **pace)
    while not stop.is_set():
        call = next_call(ledger, principal) if next_call else ledger.next_call(principal)
        await make_call(client, ledger, call, paced)


async def make_call(client: ToolClient, ledger: Ledger, call: Call, pace: Pace) -> None:
    """Submit ``call``, retrying with a new request id (same key and arguments) while no receipt comes."""
    for _ in range(ATTEMPTS):
        if not await pace.wait():
            return
        sent = await submit(client, ledger, call)
        patience_s = 0.0 if ledger.rng.random() < IMPATIENT else PATIENCE_S
        with contextlib.suppress(TimeoutError):
            issued = await client.receipt(sent.request_id, timeout_s=patience_s)
            sent.receipt, sent.received = issued, time.monotonic()
            if (call.tool, call.operation, issued.outcome) == ("file_system", "write", "succeeded"):
                ledger.readable.append(call.path)
            return


async def submit(client: ToolClient, ledger: Ledger, call: Call) -> Sent:
    """Submit one request; while the stream does not confirm it, again with the same request id."""
    sent = ledger.record(call)
    for _ in range(SUBMIT_TRIES):
        try:
            await client.submit(
                call.tool, call.operation, call.arguments, idempotency_key=call.key, request_id=sent.request_id
            )
            return sent
        except DuplicateRequest:  # an earlier try was stored after all
            ledger.duplicates += 1
            return sent
        except (nats.errors.Error, TimeoutError, RegistryUnavailable):  # nothing stored: the same request again
            ledger.resubmits += 1
            await asyncio.sleep(1.0)
    raise AssertionError(f"{call.principal}/{sent.request_id}: the stream never confirmed the request")


async def approve_pending(gate: Any, ledger: Ledger) -> None:
    """Approve every pending approval as ``alice`` (a ``finance`` one as both finance approvers),
    through Redis losses and NATS restarts."""
    while True:
        with contextlib.suppress(nats.errors.Error, TimeoutError):
            listed = await gate.approvals()
            for item in listed if isinstance(listed, list) else []:
                voters = FINANCE if item.get("approver_role") == "finance" else (APPROVER,)
                for voter in voters:
                    if voter not in item.get("votes", ()) and (await gate.decide(voter, item["approval_id"])).get("ok"):
                        ledger.approved += 1
        await asyncio.sleep(0.5)


async def drain_inotify(watch: Any) -> None:
    """Read inotify events as they come, so the kernel queue never overflows."""
    while True:
        watch.poll()
        await asyncio.sleep(1.0)


@contextlib.asynccontextmanager
async def background(gate: Any, ledger: Ledger, watch: Any) -> AsyncIterator[None]:
    """The approver and the inotify reader, until the block ends."""
    for approver in (APPROVER, *FINANCE):
        await gate.approver(approver)
    await gate.approvals()  # the operator's connection, opened before any outage
    tasks = [asyncio.create_task(approve_pending(gate, ledger)), asyncio.create_task(drain_inotify(watch))]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        ended = await asyncio.gather(*tasks, return_exceptions=True)
    if failed := [error for error in ended if isinstance(error, Exception)]:
        raise failed[0]  # the approver or the inotify reader stopped on its own


async def collect(gate: Any, ledger: Ledger) -> list[str]:
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


async def audit(gate: Any, timeout_s: float = 120.0) -> dict[str, Any]:
    """``tg.audit.verify`` once audit has caught up with the stream."""
    deadline = time.monotonic() + timeout_s
    while True:
        verified: dict[str, Any] = await gate.rpc(Rpc.AUDIT_VERIFY, {}, timeout_s=60)
        if (verified["audited_last_seq"] or 0) >= (verified["stream_last_seq"] or 0):
            return verified
        if time.monotonic() > deadline:
            return verified
        await asyncio.sleep(1.0)
