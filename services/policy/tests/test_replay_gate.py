"""The replay lookup and the rate admission asked together: the same answers in memory and in one Redis script."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
import pytest_asyncio
import redis.asyncio as aioredis

from effectgate.contracts.errors import IndexLost
from effectgate.contracts.events import DecisionMade, ToolRequested, encode, request_identity
from effectgate.contracts.tools.descriptors import RateLimit, ToolDescriptor
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.adapters.redis_gate import RedisReplayGate
from effectgate.policy.cedar.loading import load_policy
from effectgate.policy.domain import admitted_key
from effectgate.policy.errors import PolicyError
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.pipeline.gate import SequentialGate
from effectgate.policy.ports import AdmitAsk, ReplayGate, ReplayState
from effectgate.policy.service import Envelope, PolicyPorts
from effectgate.shared.stores.idempotency import EPOCH_KEY, record_key

TWO_PER_MINUTE = RateLimit(calls=2, period_s=60.0)
HASH, OTHER = "sha256:" + "a" * 64, "sha256:" + "b" * 64


class Records:
    """Writes idempotency records where the gate under test reads them."""

    def __init__(self, memory: InMemoryReplayIndex, redis: aioredis.Redis | None) -> None:
        self.memory, self.redis = memory, redis

    async def put(self, principal: str, key: str, state: str, fingerprint: str) -> None:
        if self.redis is None:
            self.memory.states[(principal, key)] = ReplayState(done=state == "done", fingerprint=fingerprint)
        else:
            await self.redis.hset(record_key(principal, key), mapping={"state": state, "fp": fingerprint})


@pytest_asyncio.fixture
async def epoch(redis_client: aioredis.Redis) -> None:
    await redis_client.set(EPOCH_KEY, "e")  # the index is complete


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest, epoch: None) -> tuple[ReplayGate, Records]:
    index = InMemoryReplayIndex()
    if request.param == "memory":
        return SequentialGate(index, InMemoryRateLimiter()), Records(index, None)
    redis: aioredis.Redis = request.getfixturevalue("redis_client")
    return RedisReplayGate(redis), Records(index, redis)


def _ask(request_id: str, *, fresh: bool = True, replay: bool = True) -> AdmitAsk:
    return AdmitAsk("fs", TWO_PER_MINUTE, request_id, fresh=fresh, replay=replay)


async def test_fresh_calls_take_the_rate_until_it_is_exhausted(store: tuple[ReplayGate, Records], ns: str) -> None:
    gate, _ = store
    answers = [await gate.screen(ns, f"k{n}", HASH, _ask(f"r{n}")) for n in range(3)]
    assert [a.state for a in answers] == [None] * 3
    assert [a.limit.allowed if a.limit else None for a in answers] == [True, True, False]
    limited = answers[2].limit
    assert limited is not None and 0 < limited.retry_after_s <= 30.0  # 60 s / 2 calls
    again = await gate.screen(ns, "k0", HASH, _ask("r0"))  # the same request decided again: counted once
    assert again.limit is not None and again.limit.allowed


async def test_a_replay_takes_the_rate_only_when_asked(store: tuple[ReplayGate, Records], ns: str) -> None:
    gate, records = store
    await records.put(ns, "done", "done", HASH)
    kept = await gate.screen(ns, "done", HASH, _ask("r1", replay=False))
    assert kept == type(kept)(ReplayState(done=True, fingerprint=HASH), None)
    taken = [await gate.screen(ns, "done", HASH, _ask(f"r{n}", fresh=False)) for n in range(2, 5)]
    assert [t.limit.allowed if t.limit else None for t in taken] == [True, True, False]


async def test_a_reused_key_and_a_call_not_run_take_nothing(store: tuple[ReplayGate, Records], ns: str) -> None:
    gate, records = store
    await records.put(ns, "used", "done", OTHER)
    await records.put(ns, "flying", "claimed", HASH)
    reused = await gate.screen(ns, "used", HASH, _ask("r1"))
    assert (reused.state, reused.limit) == (ReplayState(done=True, fingerprint=OTHER), None)
    denied = await gate.screen(ns, "flying", HASH, _ask("r2", fresh=False))  # in flight: not a replay
    assert (denied.state, denied.limit) == (ReplayState(done=False, fingerprint=HASH), None)
    fresh = [await gate.screen(ns, f"k{n}", HASH, _ask(f"r{n + 3}")) for n in range(2)]
    assert all(f.limit is not None and f.limit.allowed for f in fresh), "nothing was taken before"


async def test_a_rate_allowing_no_calls_limits_without_taking(store: tuple[ReplayGate, Records], ns: str) -> None:
    gate, _ = store
    ask = AdmitAsk("fs", RateLimit(calls=0, period_s=60.0), "r1", fresh=True, replay=True)
    answer = await gate.screen(ns, "k", HASH, ask)
    assert answer.limit is not None and not answer.limit.allowed


async def test_redis_without_its_epoch_takes_nothing_and_says_the_index_is_lost(
    redis_client: aioredis.Redis, ns: str
) -> None:
    await redis_client.delete(EPOCH_KEY)
    try:
        with pytest.raises(IndexLost):
            await RedisReplayGate(redis_client).screen(ns, "k", HASH, _ask("r1"))
        assert await redis_client.exists(admitted_key(ns, "r1")) == 0
    finally:
        await redis_client.set(EPOCH_KEY, "e")


async def test_redis_down_is_the_idempotency_store_unavailable() -> None:
    client = aioredis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    try:
        with pytest.raises(PolicyError) as caught:
            await RedisReplayGate(client).screen("p", "k", HASH, _ask("r1"))
        assert caught.value.reason_code == "idempotency_store_unavailable"
    finally:
        await client.aclose()


# --- whole decisions on Redis ----------------------------------------------------------------------


@pytest.fixture
def file_system(repo_root: Path) -> ToolDescriptor:
    return msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes(), type=ToolDescriptor)


@pytest_asyncio.fixture
async def on_redis(
    repo_root: Path, file_system: ToolDescriptor, redis_client: aioredis.Redis
) -> AsyncIterator[PolicyPorts]:
    await redis_client.set(EPOCH_KEY, "e")
    await _forget_demo_agent(redis_client)
    policy = repo_root / "deploy/policy"
    yield PolicyPorts(
        policy=PolicyHolder(load_policy(policy / "policy.cedar", policy / "principals.toml")),
        descriptors=InMemoryDescriptorSource([file_system]),
        limiter=InMemoryRateLimiter(),  # never asked by a decision: the gate takes the rate
        replays=InMemoryReplayIndex(),
        clock=lambda: datetime.now(UTC),
        max_request_bytes=65536,
        gate=RedisReplayGate(redis_client),
    )
    await _forget_demo_agent(redis_client)


async def _forget_demo_agent(redis: aioredis.Redis) -> None:
    for pattern in ("tg:rl:{demo-agent}:*", "tg:idem:{demo-agent}:*"):
        async for key in redis.scan_iter(match=pattern):
            await redis.delete(key)


async def _decide(ports: PolicyPorts, operation: str, rid: str, key: str) -> DecisionMade:
    arguments = {"path": "a.txt", "content": "x"} if operation == "write" else {"path": "a.txt"}
    request = ToolRequested(
        event_id=rid,
        occurred_at=ports.clock(),
        request_id=rid,
        tool="file_system",
        operation=operation,
        arguments=arguments,
        idempotency_key=key,
    )
    data = encode(request)
    return await decide(Envelope(principal="demo-agent", data=data, request_id=request_identity(data, None, 1)), ports)


def _codes(decisions: list[DecisionMade]) -> list[str]:
    return [d.reason_code for d in decisions]


async def test_decisions_on_redis_replay_limit_and_refuse_as_before(
    on_redis: PolicyPorts, redis_client: aioredis.Redis, file_system: ToolDescriptor
) -> None:
    first = await _decide(on_redis, "read", "r0", "k0")
    assert first.request_hash is not None and first.reason_code == "permitted"
    await redis_client.hset(record_key("demo-agent", "k0"), mapping={"state": "done", "fp": first.request_hash})
    replay = await _decide(on_redis, "read", "r1", "k0")
    assert (replay.verdict, replay.reason_code) == (Verdict.EXECUTE, "idempotent_replay")
    reused = await _decide(on_redis, "list", "r2", "k0")  # other request, same key: refused, nothing taken
    assert (reused.verdict, reused.reason_code) == (Verdict.REFUSE, "idempotency_key_reused")
    pending = [await _decide(on_redis, "write", f"w{n}", f"kw{n}") for n in range(6)]  # approvals take nothing
    assert set(_codes(pending)) == {"approval_required"}
    rest = [await _decide(on_redis, "read", f"r{n}", f"k{n}") for n in range(3, 2 + file_system.rate_limit.calls)]
    assert _codes(rest) == ["permitted"] * (file_system.rate_limit.calls - 2) + ["rate_limited"]
    assert rest[-1].retry_after_s is not None and rest[-1].retry_after_s > 0
    over = await _decide(on_redis, "read", "r99", "k0")  # a replay over the rate is limited too
    assert (over.verdict, over.reason_code) == (Verdict.DENY, "rate_limited")


async def test_a_decision_without_the_index_epoch_is_retried(
    on_redis: PolicyPorts, redis_client: aioredis.Redis
) -> None:
    await redis_client.delete(EPOCH_KEY)
    try:
        with pytest.raises(IndexLost):
            await _decide(on_redis, "read", "r0", "k0")
    finally:
        await redis_client.set(EPOCH_KEY, "e")
    assert (await _decide(on_redis, "read", "r0", "k0")).reason_code == "permitted"
