"""The receipts consumer passes over a receipt no budget applies to, and that can never settle anything."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import msgspec
import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ReceiptIssued, SecurityEvent
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Outcome
from effectgate.policy.adapters.redis_budgets import RedisBudgetLedger
from effectgate.policy.budgets.ledger import Charge, record_key
from effectgate.policy.budgets.rules import BudgetBook, parse_budgets, window_start
from effectgate.policy.budgets.settlement import may_hold_reservation
from effectgate.policy.handlers.settlement import BudgetRuntime, budget_consumers
from effectgate.policy.pipeline.admission import Spending
from effectgate.shared.consumer.consumers import Delivery
from effectgate.shared.consumer.worker import Settle
from effectgate.shared.runtime.reporting import SecurityReporter

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
RECEIPTS_KEY = Ed25519PrivateKey.generate()
BUDGETS = '[[budgets]]\nname = "reads"\nprincipal = "*"\ntool = "file_system"\nlimit = 10\nwindow_s = 86400\n'
BOOK = parse_budgets(BUDGETS)


def _receipt(principal: str, rid: str, tool: str | None, key: Ed25519PrivateKey = RECEIPTS_KEY) -> ReceiptIssued:
    unsigned = ReceiptIssued(
        event_id=f"receipt:{rid}",
        occurred_at=NOW,
        request_id=rid,
        principal=principal,
        outcome=Outcome.FAILED,
        reason_code="failed",
        reason="",
        tool=tool,
        operation="read" if tool else None,
    )
    return sign_event(unsigned, key)


def _delivered(event: ReceiptIssued) -> Delivery:
    subject = Subjects.receipt(event.principal, event.request_id)
    return Delivery(subject, msgspec.json.encode(event), {}, 1, 1, NOW)


def test_only_a_receipt_some_budget_applies_to_may_hold_a_reservation() -> None:
    assert may_hold_reservation(_receipt("p", "r", "file_system"), BOOK)
    assert may_hold_reservation(_receipt("p", "r", None), BOOK), "a receipt naming no call is settled as before"
    assert not may_hold_reservation(_receipt("p", "r", "web_search"), BOOK)
    assert not may_hold_reservation(_receipt("p", "r", "file_system"), BudgetBook())


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
    return BudgetRuntime(spending=Spending(BOOK, ledger), receipts_key=RECEIPTS_KEY.public_key(), reporter=reporter)


async def test_a_receipt_passed_over_never_releases_a_reservation(
    runtime: BudgetRuntime, ledger: RedisBudgetLedger, redis_client: aioredis.Redis, ns: str
) -> None:
    start = window_start(NOW.timestamp(), 86_400)
    assert await ledger.reserve(ns, "r1", 10_000, [Charge("reads", start, 86_400, 100_000, 4_102_444_800)]) is None
    handler, _ = budget_consumers(lambda: runtime)
    lying = _receipt(ns, "r1", "web_search", Ed25519PrivateKey.generate())  # forged, naming an unbudgeted tool
    assert await handler.handle(_delivered(lying)) is Settle.ACK
    assert await redis_client.hget(record_key(ns, "r1"), "state") in (b"reserved", "reserved")
    forged = _receipt(ns, "r1", "file_system", Ed25519PrivateKey.generate())
    assert await handler.handle(_delivered(forged)) is Settle.TERM
    assert await redis_client.hget(record_key(ns, "r1"), "state") in (b"reserved", "reserved")
    assert await handler.handle(_delivered(_receipt(ns, "r1", "file_system"))) is Settle.ACK
    assert await redis_client.hget(record_key(ns, "r1"), "state") in (b"released", "released")


async def test_an_unbudgeted_receipt_leaves_no_record(
    runtime: BudgetRuntime, redis_client: aioredis.Redis, ns: str
) -> None:
    handler, _ = budget_consumers(lambda: runtime)
    assert await handler.handle(_delivered(_receipt(ns, "r2", "web_search"))) is Settle.ACK
    assert await redis_client.exists(record_key(ns, "r2")) == 0
    assert await handler.handle(_delivered(_receipt(ns, "r3", "file_system"))) is Settle.ACK
    assert await redis_client.exists(record_key(ns, "r3")) == 1, "a budgeted call's receipt still ends its record"
