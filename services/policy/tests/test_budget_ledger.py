"""The spend ledger, in memory and on a real Redis: reserve, commit, release, uncertain, exactly once."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from itertools import count

import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from effectgate.policy.adapters.redis_budgets import RedisBudgetLedger
from effectgate.policy.budgets.ledger import BudgetCounter, Charge, Held, RecordState, counter_key, record_key
from effectgate.policy.errors import BudgetsLost, BudgetUnavailable
from effectgate.policy.memory import InMemoryBudgetLedger
from effectgate.policy.ports import BudgetLedger

DAY = 86_400
START = 1_796_083_200  # 2026-12-01T00:00:00Z


def charge(limit_units: int, budget: str = "daily", start_s: int = START) -> Charge:
    return Charge(budget, start_s, DAY, limit_units, 4_102_444_800)  # kept until 2100


_ids = count()


def rid() -> str:
    return f"r{next(_ids)}"


@pytest_asyncio.fixture
async def redis_ledger(redis_client: aioredis.Redis, ns: str) -> AsyncIterator[RedisBudgetLedger]:
    epoch = f"tg:epoch:budgets:{ns}"
    await redis_client.set(epoch, "test")
    yield RedisBudgetLedger(redis_client, epoch_key=epoch, lock_key=f"tg:rebuild:budgets:{ns}", ended_ttl_s=60)
    await redis_client.delete(epoch)


@pytest.fixture(params=["memory", "redis"])
def ledger(request: pytest.FixtureRequest) -> BudgetLedger:
    if request.param == "memory":
        return InMemoryBudgetLedger()
    ledger: BudgetLedger = request.getfixturevalue("redis_ledger")
    return ledger


async def counters_of(ledger: BudgetLedger, principal: str) -> list[BudgetCounter]:
    """Every counter of ``principal``, all pages read."""
    found: list[BudgetCounter] = []
    cursor = 0
    while True:
        page, cursor = await ledger.counters(cursor, 100)
        found += [c for c in page if c.principal == principal]
        if cursor == 0:
            return found


async def totals(ledger: BudgetLedger, principal: str) -> dict[str, tuple[int, int]]:
    """``budget → (used, reserved)`` of ``principal``'s counters."""
    return {c.budget: (c.used_units, c.reserved_units) for c in await counters_of(ledger, principal)}


async def test_reservations_fit_up_to_the_limit_then_name_the_budget(ledger: BudgetLedger, ns: str) -> None:
    limit = charge(30_000)
    assert [await ledger.reserve(ns, rid(), 10_000, [limit]) for _ in range(3)] == [None] * 3
    over = await ledger.reserve(ns, rid(), 10_000, [limit])
    assert over is not None and over.charge == limit and (over.used_units, over.reserved_units) == (0, 30_000)
    assert await totals(ledger, ns) == {"daily": (0, 30_000)}


async def test_decimals_at_the_limit_fit_and_one_unit_more_does_not(ledger: BudgetLedger, ns: str) -> None:
    hundred = charge(1_000_000)
    assert await ledger.reserve(ns, rid(), 999_900, [hundred]) is None  # 99.99
    assert await ledger.reserve(ns, rid(), 100, [hundred]) is None  # + 0.01 == 100
    assert await ledger.reserve(ns, rid(), 1, [hundred]) is not None  # + 0.0001 does not fit
    assert await totals(ledger, ns) == {"daily": (0, 1_000_000)}


async def test_every_budget_must_have_room_and_a_refusal_charges_none(ledger: BudgetLedger, ns: str) -> None:
    roomy, tight = charge(100_000, "roomy"), charge(10_000, "tight")
    assert await ledger.reserve(ns, rid(), 10_000, [roomy, tight]) is None
    over = await ledger.reserve(ns, rid(), 10_000, [roomy, tight])
    assert over is not None and over.charge.budget == "tight"
    assert await totals(ledger, ns) == {"roomy": (0, 10_000), "tight": (0, 10_000)}, "all or nothing"


async def test_a_request_is_charged_once_however_often_it_is_admitted(ledger: BudgetLedger, ns: str) -> None:
    limit, same = charge(30_000), rid()
    assert [await ledger.reserve(ns, same, 10_000, [limit]) for _ in range(5)] == [None] * 5
    assert await totals(ledger, ns) == {"daily": (0, 10_000)}


async def test_receipts_commit_release_or_keep_uncertain_and_repeat_harmlessly(ledger: BudgetLedger, ns: str) -> None:
    limit = charge(100_000)
    ok, failed, unknown = rid(), rid(), rid()
    for request in (ok, failed, unknown):
        await ledger.reserve(ns, request, 10_000, [limit])
    for _ in range(3):  # redelivered receipts change nothing twice
        await ledger.settle(ns, ok, RecordState.COMMITTED)
        await ledger.settle(ns, failed, RecordState.RELEASED)
        await ledger.settle(ns, unknown, RecordState.UNCERTAIN)
    assert await totals(ledger, ns) == {"daily": (10_000, 10_000)}, "used: the success; reserved: the uncertain one"
    [mine] = await counters_of(ledger, ns)
    assert mine.records == {
        ok: Held("committed", 10_000),
        failed: Held("released", 10_000),
        unknown: Held("uncertain", 10_000),
    }


async def test_an_uncertain_reservation_is_resolved_once_and_only_from_uncertain(ledger: BudgetLedger, ns: str) -> None:
    limit = charge(100_000)
    ran, not_run, fine = rid(), rid(), rid()
    for request in (ran, not_run, fine):
        await ledger.reserve(ns, request, 10_000, [limit])
    await ledger.settle(ns, ran, RecordState.UNCERTAIN)
    await ledger.settle(ns, not_run, RecordState.UNCERTAIN)
    await ledger.settle(ns, fine, RecordState.COMMITTED)
    resolve = {"only_from": RecordState.UNCERTAIN, "end": False}
    assert await ledger.settle(ns, ran, RecordState.COMMITTED, **resolve) is RecordState.UNCERTAIN
    assert await ledger.settle(ns, not_run, RecordState.RELEASED, **resolve) is RecordState.UNCERTAIN
    assert await ledger.settle(ns, ran, RecordState.RELEASED, **resolve) is RecordState.COMMITTED, "once"
    assert await ledger.settle(ns, fine, RecordState.RELEASED, **resolve) is RecordState.COMMITTED
    assert await ledger.settle(ns, rid(), RecordState.RELEASED, **resolve) is None
    assert await totals(ledger, ns) == {"daily": (20_000, 0)}


async def test_a_receipt_before_its_admission_leaves_nothing_to_charge(ledger: BudgetLedger, ns: str) -> None:
    """A re-check racing the backstop's receipt: the request has ended, so it is charged nothing."""
    late = rid()
    assert await ledger.settle(ns, late, RecordState.RELEASED) is None
    assert await ledger.reserve(ns, late, 10_000, [charge(10_000)]) is None
    assert await totals(ledger, ns) == {}
    assert await ledger.reserve(ns, rid(), 10_000, [charge(10_000)]) is None, "the budget is untouched"


async def test_concurrent_reservations_never_overspend(ledger: BudgetLedger, ns: str) -> None:
    limit = charge(100_000)
    results = await asyncio.gather(*(ledger.reserve(ns, rid(), 10_000, [limit]) for _ in range(40)))
    assert sum(result is None for result in results) == 10


async def test_a_ledger_without_its_epoch_refuses_until_rebuilt(
    redis_ledger: RedisBudgetLedger, redis_client: aioredis.Redis, ns: str
) -> None:
    lost: list[bool] = []
    epoch = f"tg:epoch:budgets:{ns}"
    ledger = RedisBudgetLedger(redis_client, epoch_key=epoch, on_lost=lambda: lost.append(True))
    await redis_client.delete(epoch)
    with pytest.raises(BudgetsLost):
        await ledger.reserve(ns, rid(), 1, [charge(10)])
    with pytest.raises(BudgetsLost):
        await ledger.settle(ns, rid(), RecordState.COMMITTED)
    assert lost == [True, True] and not await ledger.has_epoch()
    assert await ledger.restore(ns, "restored", 5, [charge(10)], RecordState.COMMITTED), "a rebuild writes regardless"
    assert await ledger.lock_rebuild("me", 5) and await ledger.finish_rebuild("me", "e1")
    assert await ledger.reserve(ns, rid(), 5, [charge(10)]) is None
    assert await ledger.reserve(ns, rid(), 1, [charge(10)]) is not None, "the restored spend counts"


async def test_an_unreachable_store_is_unavailable_fast(ns: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here
    client = aioredis.Redis(port=port, socket_timeout=0.2, retry=Retry(NoBackoff(), 0))
    ledger = RedisBudgetLedger(client, timeout_s=0.5)
    with pytest.raises(BudgetUnavailable) as refused:
        await ledger.reserve(ns, rid(), 1, [charge(10)])
    assert refused.value.reason_code == "budget_unavailable"
    with pytest.raises(BudgetUnavailable):
        await ledger.settle(ns, rid(), RecordState.COMMITTED)
    await client.aclose()


async def test_counters_and_records_expire_after_their_window_and_the_keep(
    redis_ledger: RedisBudgetLedger, redis_client: aioredis.Redis, ns: str
) -> None:
    now_s = int(time.time())
    short, long = Charge("short", now_s, 60, 10, now_s + 100), Charge("long", now_s, 600, 10, now_s + 1000)
    request = rid()
    await redis_ledger.reserve(ns, request, 1, [short, long])
    assert 95_000 < await redis_client.pttl(counter_key(ns, "short", now_s)) <= 100_000
    assert 995_000 < await redis_client.pttl(record_key(ns, request)) <= 1_000_000, (
        "the record lives with its last counter"
    )
