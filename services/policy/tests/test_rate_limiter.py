"""The GCRA admission limiter: in memory (injected clock) and on a real Redis, exactly once per request id."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from itertools import count

import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from effectgate.contracts.tools.descriptors import RateLimit
from effectgate.policy.adapters.redis_limiter import RedisRateLimiter
from effectgate.policy.domain import admitted_key, limiter_key
from effectgate.policy.errors import LimiterUnavailable
from effectgate.policy.memory import InMemoryRateLimiter
from effectgate.policy.ports import RateLimiter

FIVE_PER_MINUTE = RateLimit(calls=5, period_s=60.0)


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", "redis"])
def limiter(request: pytest.FixtureRequest, clock: FakeClock) -> RateLimiter:
    if request.param == "memory":
        return InMemoryRateLimiter(clock)
    return RedisRateLimiter(request.getfixturevalue("redis_client"))


_ids = count()


def rid() -> str:
    """A fresh request id."""
    return f"r{next(_ids)}"


async def test_calls_up_to_the_burst_are_allowed_then_limited(limiter: RateLimiter, ns: str) -> None:
    decisions = [await limiter.admit(ns, "fs", FIVE_PER_MINUTE, rid()) for _ in range(7)]
    assert [d.allowed for d in decisions] == [True] * 5 + [False] * 2
    assert [d.remaining for d in decisions[:5]] == [4, 3, 2, 1, 0]
    limited = decisions[5]
    assert limited.remaining == 0
    assert 0 < limited.retry_after_s <= 12.0  # one emission interval: 60 s / 5
    assert limited.retry_after_s == round(limited.retry_after_s, 3), "rounded up to the millisecond"


async def test_principals_and_buckets_are_limited_independently(limiter: RateLimiter, ns: str) -> None:
    one_call = RateLimit(calls=1, period_s=60.0)
    assert (await limiter.admit(f"{ns}-a", "fs", one_call, rid())).allowed
    assert not (await limiter.admit(f"{ns}-a", "fs", one_call, rid())).allowed
    assert (await limiter.admit(f"{ns}-b", "fs", one_call, rid())).allowed
    assert (await limiter.admit(f"{ns}-a", "git", one_call, rid())).allowed
    assert (await limiter.admit(f"{ns}-a", "fs.write", one_call, rid())).allowed


async def test_concurrent_admissions_admit_exactly_the_burst(limiter: RateLimiter, ns: str) -> None:
    decisions = await asyncio.gather(*(limiter.admit(ns, "fs", FIVE_PER_MINUTE, rid()) for _ in range(30)))
    assert sum(d.allowed for d in decisions) == 5


async def test_a_request_is_counted_once_however_often_it_is_admitted(limiter: RateLimiter, ns: str) -> None:
    again = [await limiter.admit(ns, "fs", FIVE_PER_MINUTE, "same") for _ in range(10)]
    assert all(d.allowed for d in again)
    assert [d.remaining for d in again] == [4] * 10, "a repeated admission was counted"
    others = [(await limiter.admit(ns, "fs", FIVE_PER_MINUTE, rid())).allowed for _ in range(5)]
    assert others == [True] * 4 + [False]


async def test_concurrent_admissions_of_one_request_count_it_once(limiter: RateLimiter, ns: str) -> None:
    same = await asyncio.gather(*(limiter.admit(ns, "fs", FIVE_PER_MINUTE, "one") for _ in range(20)))
    assert all(d.allowed for d in same)
    others = [(await limiter.admit(ns, "fs", FIVE_PER_MINUTE, rid())).allowed for _ in range(5)]
    assert others == [True] * 4 + [False]


async def test_an_admitted_request_stays_admitted_when_the_budget_is_spent(limiter: RateLimiter, ns: str) -> None:
    rate = RateLimit(calls=1, period_s=60.0)
    assert (await limiter.admit(ns, "fs", rate, "first")).allowed
    assert not (await limiter.admit(ns, "fs", rate, "second")).allowed
    assert (await limiter.admit(ns, "fs", rate, "first")).allowed, "a re-check of an admitted call was refused"


async def test_a_rate_allowing_no_calls_limits_every_call(limiter: RateLimiter, ns: str) -> None:
    decision = await limiter.admit(ns, "fs", RateLimit(calls=0, period_s=60.0), rid())
    assert (decision.allowed, decision.remaining) == (False, 0)


# --- in memory: time moves only when the test says so -----------------------------------------


async def test_in_memory_refills_one_call_per_emission_interval(clock: FakeClock) -> None:
    limiter, rate = InMemoryRateLimiter(clock), RateLimit(calls=2, period_s=10.0)
    assert [(await limiter.admit("p", "fs", rate, rid())).allowed for _ in range(3)] == [True, True, False]
    clock.now_s += 4.9
    limited = await limiter.admit("p", "fs", rate, rid())
    assert not limited.allowed and limited.retry_after_s == pytest.approx(0.1)
    clock.now_s += 0.1
    assert (await limiter.admit("p", "fs", rate, rid())).allowed
    assert not (await limiter.admit("p", "fs", rate, rid())).allowed


async def test_in_memory_limited_calls_consume_nothing(clock: FakeClock) -> None:
    limiter, rate = InMemoryRateLimiter(clock), RateLimit(calls=1, period_s=10.0)
    await limiter.admit("p", "fs", rate, rid())
    for _ in range(5):
        assert not (await limiter.admit("p", "fs", rate, "waiting")).allowed
    clock.now_s += 10.0
    assert (await limiter.admit("p", "fs", rate, "waiting")).allowed, "a limited request was remembered as admitted"
    assert not (await limiter.admit("p", "fs", rate, rid())).allowed


async def test_in_memory_forgets_an_admission_after_its_ttl(clock: FakeClock) -> None:
    limiter, rate = InMemoryRateLimiter(clock, admitted_ttl_s=30.0), RateLimit(calls=1, period_s=100.0)
    assert (await limiter.admit("p", "fs", rate, "r")).allowed
    clock.now_s += 29.0
    assert (await limiter.admit("p", "fs", rate, "r")).allowed, "a remembered admission was refused"
    clock.now_s += 2.0
    assert not (await limiter.admit("p", "fs", rate, "r")).allowed, "a forgotten admission was not counted again"


# --- Redis ----------------------------------------------------------------------------------


async def test_redis_keys_are_hash_tagged_by_principal_and_expire(redis_client: aioredis.Redis, ns: str) -> None:
    await RedisRateLimiter(redis_client, admitted_ttl_s=120.0).admit(ns, "fs", FIVE_PER_MINUTE, "r1")
    key, marker = limiter_key(ns, "fs"), admitted_key(ns, "r1")
    assert (key, marker) == (f"tg:rl:{{{ns}}}:fs", f"tg:rl:{{{ns}}}:admitted:r1")
    assert 0 < await redis_client.pttl(key) <= 60_001
    assert 60_001 < await redis_client.pttl(marker) <= 120_000


async def test_redis_limited_request_leaves_no_marker(redis_client: aioredis.Redis, ns: str) -> None:
    limiter, rate = RedisRateLimiter(redis_client), RateLimit(calls=1, period_s=60.0)
    assert (await limiter.admit(ns, "fs", rate, "r1")).allowed
    assert not (await limiter.admit(ns, "fs", rate, "r2")).allowed
    assert await redis_client.exists(admitted_key(ns, "r2")) == 0


async def test_redis_refills_after_the_emission_interval(redis_client: aioredis.Redis, ns: str) -> None:
    limiter, rate = RedisRateLimiter(redis_client), RateLimit(calls=2, period_s=1.0)
    assert [(await limiter.admit(ns, "fs", rate, rid())).allowed for _ in range(3)] == [True, True, False]
    await asyncio.sleep(0.6)  # one emission interval: 1.0 s / 2
    assert (await limiter.admit(ns, "fs", rate, rid())).allowed


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest_asyncio.fixture
async def unreachable_redis() -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis(
        host="127.0.0.1",
        port=_closed_port(),
        socket_timeout=0.2,
        socket_connect_timeout=0.2,
        retry=Retry(NoBackoff(), 0),
    )
    yield client
    await client.aclose()


async def _elapsed(call: Callable[[], Awaitable[object]]) -> float:
    started = time.monotonic()
    with pytest.raises(LimiterUnavailable) as caught:
        await call()
    assert caught.value.reason_code == "rate_limiter_unavailable"
    return time.monotonic() - started


async def test_unreachable_redis_fails_closed_quickly(unreachable_redis: aioredis.Redis) -> None:
    limiter = RedisRateLimiter(unreachable_redis)
    assert await _elapsed(lambda: limiter.admit("p", "fs", FIVE_PER_MINUTE, "r")) < 2.0


async def test_silent_redis_is_bounded_by_the_limiter_timeout(ns: str) -> None:
    async def accept_and_say_nothing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(-1)

    server = await asyncio.start_server(accept_and_say_nothing, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = aioredis.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0))  # default 5 s timeouts
    try:
        limiter = RedisRateLimiter(client, timeout_s=0.3)
        assert await _elapsed(lambda: limiter.admit(ns, "fs", FIVE_PER_MINUTE, "r")) < 2.0
    finally:
        await client.aclose()
        server.close()
