"""The GCRA rate limiter: in memory (injected clock) and on a real Redis."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from toolgate.policy.adapters.redis_limiter import RedisRateLimiter
from toolgate.policy.errors import LimiterUnavailable
from toolgate.policy.ports import InMemoryRateLimiter, RateLimiter, limiter_key
from toolgate.shared.descriptors import RateLimit

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


async def test_calls_up_to_the_burst_are_allowed_then_limited(limiter: RateLimiter, ns: str) -> None:
    decisions = [await limiter.acquire(ns, "fs", FIVE_PER_MINUTE) for _ in range(7)]
    assert [d.allowed for d in decisions] == [True] * 5 + [False] * 2
    assert [d.remaining for d in decisions[:5]] == [4, 3, 2, 1, 0]
    limited = decisions[5]
    assert limited.remaining == 0
    assert 0 < limited.retry_after_s <= 12.0  # one emission interval: 60 s / 5


async def test_principals_and_tools_are_limited_independently(limiter: RateLimiter, ns: str) -> None:
    one_call = RateLimit(calls=1, period_s=60.0)
    assert (await limiter.acquire(f"{ns}-a", "fs", one_call)).allowed
    assert not (await limiter.acquire(f"{ns}-a", "fs", one_call)).allowed
    assert (await limiter.acquire(f"{ns}-b", "fs", one_call)).allowed
    assert (await limiter.acquire(f"{ns}-a", "git", one_call)).allowed


async def test_concurrent_acquires_admit_exactly_the_burst(limiter: RateLimiter, ns: str) -> None:
    decisions = await asyncio.gather(*(limiter.acquire(ns, "fs", FIVE_PER_MINUTE) for _ in range(30)))
    assert sum(d.allowed for d in decisions) == 5


async def test_a_rate_allowing_no_calls_limits_every_call(limiter: RateLimiter, ns: str) -> None:
    decision = await limiter.acquire(ns, "fs", RateLimit(calls=0, period_s=60.0))
    assert (decision.allowed, decision.remaining) == (False, 0)


# --- in memory: time moves only when the test says so -----------------------------------------


async def test_in_memory_refills_one_call_per_emission_interval(clock: FakeClock) -> None:
    limiter, rate = InMemoryRateLimiter(clock), RateLimit(calls=2, period_s=10.0)
    assert [(await limiter.acquire("p", "fs", rate)).allowed for _ in range(3)] == [True, True, False]
    clock.now_s += 4.9
    limited = await limiter.acquire("p", "fs", rate)
    assert not limited.allowed and limited.retry_after_s == pytest.approx(0.1)
    clock.now_s += 0.1
    assert (await limiter.acquire("p", "fs", rate)).allowed
    assert not (await limiter.acquire("p", "fs", rate)).allowed


async def test_in_memory_limited_calls_consume_nothing(clock: FakeClock) -> None:
    limiter, rate = InMemoryRateLimiter(clock), RateLimit(calls=1, period_s=10.0)
    await limiter.acquire("p", "fs", rate)
    for _ in range(5):
        assert not (await limiter.acquire("p", "fs", rate)).allowed
    clock.now_s += 10.0
    assert (await limiter.acquire("p", "fs", rate)).allowed


# --- Redis ----------------------------------------------------------------------------------


async def test_redis_key_is_hash_tagged_by_principal_and_expires(redis_client: aioredis.Redis, ns: str) -> None:
    await RedisRateLimiter(redis_client).acquire(ns, "fs", FIVE_PER_MINUTE)
    key = limiter_key(ns, "fs")
    assert key == f"tg:rl:{{{ns}}}:fs"
    ttl_ms = await redis_client.pttl(key)
    assert 0 < ttl_ms <= 60_001


async def test_redis_refills_after_the_emission_interval(redis_client: aioredis.Redis, ns: str) -> None:
    limiter, rate = RedisRateLimiter(redis_client), RateLimit(calls=2, period_s=1.0)
    assert [(await limiter.acquire(ns, "fs", rate)).allowed for _ in range(3)] == [True, True, False]
    await asyncio.sleep(0.6)  # one emission interval: 1.0 s / 2
    assert (await limiter.acquire(ns, "fs", rate)).allowed


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
    assert await _elapsed(lambda: limiter.acquire("p", "fs", FIVE_PER_MINUTE)) < 2.0


async def test_silent_redis_is_bounded_by_the_limiter_timeout(ns: str) -> None:
    async def accept_and_say_nothing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(-1)

    server = await asyncio.start_server(accept_and_say_nothing, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = aioredis.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0))  # default 5 s timeouts
    try:
        limiter = RedisRateLimiter(client, timeout_s=0.3)
        assert await _elapsed(lambda: limiter.acquire(ns, "fs", FIVE_PER_MINUTE)) < 2.0
    finally:
        await client.aclose()
        server.close()
