"""Receipts settle spend reservations on a real Redis; the counters agree with the receipts, and a drift is found.

The receipts consumer's handler runs on hand-made deliveries of executor-signed (or forged)
receipts; the reconciliation check compares the real counters with the receipts; the
rebuild restores a lost ledger from the stream's events.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import (
    ApprovalGranted,
    BoundRequest,
    DecisionMade,
    ReceiptIssued,
    Resolution,
    SecurityEvent,
    UncertainResolved,
)
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.vocabulary import Outcome, Verdict
from effectgate.policy.adapters.redis_budgets import RedisBudgetLedger
from effectgate.policy.budgets.ledger import BudgetCounter, Charge, counter_key
from effectgate.policy.budgets.rebuild import rebuild_budgets
from effectgate.policy.budgets.reconciliation import differences, pending
from effectgate.policy.budgets.rules import parse_budgets, window_start
from effectgate.policy.handlers.settlement import BudgetRuntime, budget_consumers
from effectgate.policy.memory import InMemoryDescriptorSource, InMemorySpendTrail
from effectgate.policy.pipeline.admission import Spending
from effectgate.shared.consumer.consumers import Delivery
from effectgate.shared.consumer.worker import Later, Settle
from effectgate.shared.runtime.reporting import SecurityReporter

pytestmark = pytest.mark.connected

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
RECEIPTS_KEY = Ed25519PrivateKey.generate()
BUDGETS = '[[budgets]]\nname = "reads"\nprincipal = "*"\ntool = "file_system"\nlimit = 10\nwindow_s = 86400\n'


def daily(start_s: int | None = None) -> Charge:
    start = window_start(NOW.timestamp(), 86_400) if start_s is None else start_s
    return Charge("reads", start, 86_400, 100_000, 4_102_444_800)


@pytest_asyncio.fixture
async def ledger(redis_client: aioredis.Redis, ns: str) -> AsyncIterator[RedisBudgetLedger]:
    epoch = f"tg:epoch:budgets:{ns}"
    await redis_client.set(epoch, "test")
    yield RedisBudgetLedger(redis_client, epoch_key=epoch, lock_key=f"tg:rebuild:budgets:{ns}")
    await redis_client.delete(epoch)


@pytest.fixture
def reports() -> list[SecurityEvent]:
    return []


@pytest.fixture
def runtime(ledger: RedisBudgetLedger, reports: list[SecurityEvent]) -> BudgetRuntime:
    reporter = SecurityReporter("policy")

    async def publish(subject: str, event: SecurityEvent) -> None:
        reports.append(event)

    reporter.attach_publish(publish)
    spending = Spending(parse_budgets(BUDGETS), ledger)
    return BudgetRuntime(spending=spending, receipts_key=RECEIPTS_KEY.public_key(), reporter=reporter)


def receipt(principal: str, rid: str, outcome: Outcome, at: datetime = NOW) -> ReceiptIssued:
    unsigned = ReceiptIssued(
        event_id=f"receipt:{rid}",
        occurred_at=at,
        request_id=rid,
        principal=principal,
        outcome=outcome,
        reason_code="ok",
        reason="",
    )
    return sign_event(unsigned, RECEIPTS_KEY)


def delivered(event: ReceiptIssued, subject: str | None = None, attempt: int = 1) -> Delivery:
    subject = subject or Subjects.receipt(event.principal, event.request_id)
    return Delivery(subject, msgspec.json.encode(event), {}, 1, attempt, NOW)


async def counters_of(ledger: RedisBudgetLedger, principal: str) -> list[BudgetCounter]:
    page, cursor, found = [], 0, []
    while True:
        page, cursor = await ledger.counters(cursor, 100)
        found += [c for c in page if c.principal == principal]
        if cursor == 0:
            return found


async def test_receipts_commit_release_and_keep_uncertain_exactly_once(
    runtime: BudgetRuntime, ledger: RedisBudgetLedger, ns: str
) -> None:
    outcomes = {
        "ok": Outcome.SUCCEEDED,
        "failed": Outcome.FAILED,
        "denied": Outcome.DENIED,
        "refused": Outcome.REFUSED,
        "replayed": Outcome.REPLAYED,
        "unknown": Outcome.UNCERTAIN,
    }
    for rid in outcomes:
        assert await ledger.reserve(ns, rid, 10_000, [daily()]) is None
    handler, _ = budget_consumers(lambda: runtime)
    for attempt in (1, 2, 3):  # redelivered receipts change nothing twice
        for rid, outcome in outcomes.items():
            assert await handler.handle(delivered(receipt(ns, rid, outcome), attempt=attempt)) is Settle.ACK
    [counter] = await counters_of(ledger, ns)
    assert (counter.used_units, counter.reserved_units) == (10_000, 10_000)
    states = {rid: held.state for rid, held in counter.records.items()}
    assert states == {
        "ok": "committed",
        "failed": "released",
        "denied": "released",
        "refused": "released",
        "replayed": "released",
        "unknown": "uncertain",
    }


def _resolved(principal: str, rid: str, resolved: Resolution) -> UncertainResolved:
    return UncertainResolved(
        event_id=f"rsl_{rid}_{resolved}",
        occurred_at=NOW,
        request_id=rid,
        principal=principal,
        receipt_id=f"receipt:{rid}",
        resolution=resolved,
        resolved_by="reconciler",
    )


def resolution(principal: str, rid: str, resolved: Resolution, key: Ed25519PrivateKey = RECEIPTS_KEY) -> Delivery:
    unsigned = UncertainResolved(
        event_id=f"rsl_{rid}_{resolved}",
        occurred_at=NOW,
        request_id=rid,
        principal=principal,
        receipt_id=f"receipt:{rid}",
        resolution=resolved,
        resolved_by="reconciler",
    )
    data = msgspec.json.encode(sign_event(unsigned, key))
    return Delivery(Subjects.resolution(principal, rid), data, {}, 1, 1, NOW)


async def test_a_resolution_commits_ran_releases_not_run_and_keeps_unknown_held(
    runtime: BudgetRuntime, ledger: RedisBudgetLedger, ns: str, reports: list[SecurityEvent]
) -> None:
    receipts, resolutions = budget_consumers(lambda: runtime)
    for rid in ("ran", "not_run", "unknown", "forged"):
        await ledger.reserve(ns, rid, 10_000, [daily()])
        assert await receipts.handle(delivered(receipt(ns, rid, Outcome.UNCERTAIN))) is Settle.ACK
    for attempt in (1, 2):  # a redelivered resolution changes nothing twice
        for rid in ("ran", "not_run", "unknown"):
            assert await resolutions.handle(resolution(ns, rid, rid)) is Settle.ACK, (rid, attempt)  # type: ignore[arg-type]
    forged = resolution(ns, "forged", "not_run", Ed25519PrivateKey.generate())
    assert await resolutions.handle(forged) is Settle.TERM
    [counter] = await counters_of(ledger, ns)
    states = {rid: held.state for rid, held in counter.records.items()}
    assert states == {"ran": "committed", "not_run": "released", "unknown": "uncertain", "forged": "uncertain"}
    assert (counter.used_units, counter.reserved_units) == (10_000, 20_000)
    await asyncio.sleep(0.05)
    assert [(r.kind, r.request_id) for r in reports] == [("receipt_forged", "forged")]


async def test_a_resolution_before_its_uncertain_receipt_was_settled_waits_for_it(
    runtime: BudgetRuntime, ledger: RedisBudgetLedger, ns: str
) -> None:
    receipts, resolutions = budget_consumers(lambda: runtime)
    await ledger.reserve(ns, "r1", 10_000, [daily()])
    assert isinstance(await resolutions.handle(resolution(ns, "r1", "not_run")), Later)
    await receipts.handle(delivered(receipt(ns, "r1", Outcome.UNCERTAIN)))
    assert await resolutions.handle(resolution(ns, "r1", "not_run")) is Settle.ACK
    [counter] = await counters_of(ledger, ns)
    assert counter.records["r1"].state == "released" and counter.reserved_units == 0


async def test_a_forged_receipt_settles_nothing_and_is_reported(
    runtime: BudgetRuntime, ledger: RedisBudgetLedger, ns: str, reports: list[SecurityEvent]
) -> None:
    await ledger.reserve(ns, "r1", 10_000, [daily()])
    handler, _ = budget_consumers(lambda: runtime)
    forged = sign_event(receipt(ns, "r1", Outcome.FAILED), Ed25519PrivateKey.generate())
    assert await handler.handle(delivered(forged)) is Settle.TERM
    elsewhere = receipt(ns, "r1", Outcome.FAILED)  # a real receipt copied onto another request's subject
    assert await handler.handle(delivered(elsewhere, Subjects.receipt(ns, "r2"))) is Settle.TERM
    assert await handler.handle(Delivery(Subjects.receipt(ns, "r1"), b"not json", {}, 1, 1, NOW)) is Settle.TERM
    await asyncio.sleep(0.05)  # reports are published in the background
    assert [(r.kind, r.request_id) for r in reports] == [("receipt_forged", "r1"), ("receipt_forged", "r1")]
    [counter] = await counters_of(ledger, ns)
    assert counter.reserved_units == 10_000 and counter.records["r1"].state == "reserved"


async def test_a_receipt_waits_while_the_ledger_is_rebuilt(
    runtime: BudgetRuntime, ledger: RedisBudgetLedger, redis_client: aioredis.Redis, ns: str
) -> None:
    await redis_client.delete(f"tg:epoch:budgets:{ns}")
    handler, _ = budget_consumers(lambda: runtime)
    assert isinstance(await handler.handle(delivered(receipt(ns, "r1", Outcome.SUCCEEDED))), Later)


async def test_the_check_reports_nothing_for_a_clean_run_and_finds_a_planted_drift(
    runtime: BudgetRuntime, ledger: RedisBudgetLedger, redis_client: aioredis.Redis, ns: str
) -> None:
    seen: dict[tuple[str, str], str] = {}
    handler, _ = budget_consumers(lambda: runtime)
    for n, outcome in enumerate([Outcome.SUCCEEDED, Outcome.FAILED, Outcome.UNCERTAIN, Outcome.SUCCEEDED]):
        await ledger.reserve(ns, f"r{n}", 10_000, [daily()])
        issued = receipt(ns, f"r{n}", outcome)
        await handler.handle(delivered(issued))
        seen[(ns, f"r{n}")] = outcome.value
    await ledger.reserve(ns, "running", 10_000, [daily()])
    counters = await counters_of(ledger, ns)
    assert differences(counters, seen) == []
    assert [(p.kind, p.request_id) for p in pending(counters, seen)] == [
        ("awaiting_resolution", "r2"),
        ("in_flight", "running"),
    ]

    key = counter_key(ns, "reads", daily().start_s)
    await redis_client.hincrby(key, "used", 5_000)  # spend no record accounts for
    await redis_client.hset(key, "r:r1", "committed:10000")  # a failed call counted as spent
    found = differences(await counters_of(ledger, ns), {**seen, (ns, "running"): "succeeded"})
    assert sorted((d.kind, d.request_id) for d in found) == [
        ("committed_without_success", "r1"),
        ("counter_mismatch", None),
        ("receipt_not_applied", "running"),
    ]


def _decision(principal: str, rid: str, verdict: Verdict, at: datetime, reason_code: str = "permitted") -> DecisionMade:
    bound = BoundRequest(
        principal=principal,
        tool="file_system",
        version="1.0.0",
        descriptor_digest="sha256:x",
        operation="read",
        arguments={"path": "a.txt"},
    )
    return DecisionMade(
        event_id=f"decision:{rid}",
        occurred_at=at,
        request_id=rid,
        principal=principal,
        verdict=verdict,
        reason_code=reason_code,
        reason="",
        request=bound,
    )


def _grant(principal: str, rid: str, at: datetime) -> ApprovalGranted:
    return ApprovalGranted(
        event_id=f"grant:{rid}",
        occurred_at=at,
        request_id=rid,
        principal=principal,
        approval_id=f"ap-{rid}",
        request_hash="sha256:x",
        approver="alice",
        expires_at=at + timedelta(minutes=15),
    )


async def test_a_lost_ledger_is_rebuilt_from_the_stream(
    repo_root: Path, ledger: RedisBudgetLedger, redis_client: aioredis.Redis, ns: str
) -> None:
    data = (repo_root / "deploy/tools/file_system.json").read_bytes()
    descriptor = msgspec.json.decode(data, type=ToolDescriptor)
    read = msgspec.structs.replace(descriptor.operations["read"], cost=1)
    descriptor = msgspec.structs.replace(
        descriptor, version="1.0.0", operations={**descriptor.operations, "read": read}
    )
    midnight = datetime(2026, 11, 30, tzinfo=UTC)
    late = midnight - timedelta(minutes=5)  # granted before midnight, admitted before or after it
    trail = InMemorySpendTrail(
        decided=[
            _decision(ns, "ok", Verdict.EXECUTE, NOW),
            _decision(ns, "failed", Verdict.EXECUTE, NOW),
            _decision(ns, "running", Verdict.EXECUTE, NOW),
            _decision(ns, "unknown", Verdict.EXECUTE, NOW),
            _decision(ns, "replay", Verdict.EXECUTE, NOW, "idempotent_replay"),
            _decision(ns, "denied", Verdict.DENY, NOW, "budget_exceeded"),
            _decision(ns, "waiting", Verdict.NEEDS_APPROVAL, NOW),
            _decision(ns, "granted", Verdict.NEEDS_APPROVAL, late),
            _decision(ns, "ran-since", Verdict.EXECUTE, NOW),
            _decision(ns, "not-run-since", Verdict.EXECUTE, NOW),
        ],
        grants=[_grant(ns, "granted", late)],
        receipts=[
            receipt(ns, "ok", Outcome.SUCCEEDED),
            receipt(ns, "failed", Outcome.FAILED),
            receipt(ns, "unknown", Outcome.UNCERTAIN),
            receipt(ns, "granted", Outcome.SUCCEEDED, midnight + timedelta(minutes=1)),
            receipt(ns, "ran-since", Outcome.UNCERTAIN),
            receipt(ns, "not-run-since", Outcome.UNCERTAIN),
        ],
        resolutions=[  # what became of two uncertain calls since: spent, and released
            _resolved(ns, "ran-since", "ran"),
            _resolved(ns, "not-run-since", "unknown"),
            _resolved(ns, "not-run-since", "not_run"),
        ],
    )
    spending = Spending(parse_budgets(BUDGETS), ledger)
    await redis_client.delete(f"tg:epoch:budgets:{ns}")
    clock = lambda: midnight + timedelta(hours=1)  # noqa: E731
    descriptors = InMemoryDescriptorSource([descriptor])
    assert await rebuild_budgets(spending, ledger, trail, descriptors, clock, "me")
    assert await ledger.has_epoch()
    counters = {c.start_s: c for c in await counters_of(ledger, ns)}
    before, after = int(midnight.timestamp()) - 86_400, int(midnight.timestamp())
    assert sorted(counters) == [before, after]
    assert {rid: h.state for rid, h in counters[before].records.items()} == {
        "ok": "committed",
        "running": "reserved",
        "unknown": "uncertain",
        "granted": "committed",
        "ran-since": "committed",
    }
    assert (counters[before].used_units, counters[before].reserved_units) == (30_000, 20_000)
    assert {rid: h.state for rid, h in counters[after].records.items()} == {"granted": "committed"}, (
        "a grant admitted around midnight counts in both windows: never missed"
    )
    assert await rebuild_budgets(spending, ledger, trail, descriptors, clock, "me"), "complete: nothing to do"
