"""A Sentinel failover to a replica that missed the latest claims is detected: nothing is re-granted.

Real servers: a primary, one replica and three Sentinels (:func:`effectgate.devstack.sentinels.sentinel_group`).
The replica is held back while a claim is written, then the primary is killed: the promoted
replica holds the epoch markers (copied earlier) but not that claim.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import pytest
import redis
import redis.asyncio as aioredis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client
from nats.js import JetStreamContext

from effectgate.approvals.adapters.redis_store import EPOCH as APPROVALS_EPOCH
from effectgate.approvals.adapters.redis_store import RedisApprovalStore
from effectgate.approvals.errors import ApprovalStoreUnavailable
from effectgate.contracts.errors import IndexLost
from effectgate.contracts.events import EffectClaimed
from effectgate.devstack.sentinels import SentinelGroup
from effectgate.executor.adapters.redis_idempotency import RedisIdempotencyStore
from effectgate.executor.adapters.stream import StreamBus
from effectgate.executor.background.rebuild import rebuild_index
from effectgate.executor.domain import ClaimState
from effectgate.executor.errors import IdempotencyStoreUnavailable
from effectgate.executor.ports import ClaimRequest
from effectgate.policy.adapters.redis_budgets import EPOCH_KEY as BUDGETS_EPOCH
from effectgate.policy.adapters.redis_budgets import RedisBudgetLedger
from effectgate.policy.adapters.redis_replays import RedisReplayIndex
from effectgate.policy.budgets.ledger import Charge
from effectgate.policy.errors import BudgetsLost, BudgetUnavailable, PolicyError
from effectgate.shared.config.settings import ServiceSettings
from effectgate.shared.runtime.connections import redis_client
from effectgate.shared.runtime.redis_clients import EPOCH_KEYS
from effectgate.shared.stores.idempotency import EPOCH_KEY, key_digest
from effectgate.shared.stores.rebuild_lock import RebuildLock

pytestmark = [pytest.mark.connected, pytest.mark.fault]


def _claim(key: str, request_id: str) -> ClaimRequest:
    return ClaimRequest("p", key, "fp", request_id, "exec", f"nonce-{request_id}", 60)


async def _rebuilt(client: aioredis.Redis, epoch_key: str) -> None:
    lock = RebuildLock(client, f"lock:{epoch_key}", epoch_key)
    assert await lock.take("me") and await lock.finish("me", "e1")


async def _first_answer(store: RedisIdempotencyStore, request: ClaimRequest, timeout_s: float = 10.0) -> object:
    """The first claim answer (or IndexLost) once the new primary is reached; unavailable meanwhile."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await store.claim(request)
        except IdempotencyStoreUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
        except IndexLost as lost:
            return lost


def _raw(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)


def test_every_index_the_services_rebuild_is_fenced() -> None:
    assert {EPOCH_KEY, APPROVALS_EPOCH, BUDGETS_EPOCH} == set(EPOCH_KEYS)


async def test_a_failover_to_a_lagging_replica_refuses_every_claim_until_rebuilt(
    redis_sentinels: SentinelGroup,
) -> None:
    client = redis_client(ServiceSettings(redis_url=redis_sentinels.url, redis_timeout_s=0.5))
    store = RedisIdempotencyStore(client)
    for epoch_key in EPOCH_KEYS:
        await _rebuilt(client, epoch_key)
    assert (await store.claim(_claim("k1", "r1"))).state is ClaimState.NEW
    assert await client.execute_command("WAIT", 1, 2000) == 1  # k1 and the epochs are on the replica
    with redis_sentinels.replication_held():
        assert (await store.claim(_claim("k2", "r2"))).state is ClaimState.NEW  # on the primary only
        redis_sentinels.kill_primary()
    started = time.monotonic()
    with pytest.raises(IdempotencyStoreUnavailable):  # the failover window: refused at once, never a hang
        await store.claim(_claim("k2", "r3"))
    assert time.monotonic() - started < 3.0
    promoted = redis_sentinels.wait_failover()
    with _raw(promoted) as raw:  # the replica lagged: it copied the epochs, not the second claim
        assert raw.exists(*EPOCH_KEYS) == 3 and raw.exists("tg:idem:{p}:" + _digest("k2")) == 0
    assert isinstance(await _first_answer(store, _claim("k2", "r3")), IndexLost)  # never a silent re-grant
    assert await client.exists(*EPOCH_KEYS) == 0  # every index reads as lost, not only the executor's
    await client.aclose()


async def test_an_epoch_set_on_the_new_primary_stays_across_reconnects(redis_sentinels: SentinelGroup) -> None:
    client = redis_client(ServiceSettings(redis_url=redis_sentinels.url, redis_timeout_s=0.5))
    store = RedisIdempotencyStore(client)
    await _rebuilt(client, EPOCH_KEY)
    assert (await store.claim(_claim("k1", "r1"))).state is ClaimState.NEW
    assert await client.execute_command("WAIT", 1, 2000) == 1
    redis_sentinels.kill_primary()
    redis_sentinels.wait_failover()
    assert isinstance(await _first_answer(store, _claim("k1", "r2")), IndexLost)
    assert await store.lock_rebuild("me", 15) and await store.finish_rebuild("me", "e2")
    await client.connection_pool.disconnect()  # new connections: the fence keeps this primary's epoch
    assert await store.has_epoch()
    assert (await store.claim(_claim("k1", "r2"))).state is ClaimState.INFLIGHT  # the replicated claim holds
    await client.aclose()


async def test_a_claim_the_promoted_replica_missed_comes_back_from_the_stream(
    redis_sentinels: SentinelGroup, nc: Client, js: JetStreamContext, ns: str
) -> None:
    client = redis_client(ServiceSettings(redis_url=redis_sentinels.url, redis_timeout_s=0.5))
    store, bus = RedisIdempotencyStore(client), StreamBus(nc, js, Ed25519PrivateKey.generate())
    await _rebuilt(client, EPOCH_KEY)
    assert await client.execute_command("WAIT", 1, 2000) == 1
    with redis_sentinels.replication_held():  # the executor's order: the index claim, the stream claim, the write
        assert (await store.claim(ClaimRequest(ns, "k", "fp", "r1", "exec-a", "n1", 600))).state is ClaimState.NEW
        claimed = EffectClaimed(
            event_id=f"c-{ns}", occurred_at=datetime.now(UTC), request_id="r1", principal=ns,
            key_digest=key_digest("k"), request_hash="fp", effect_id="e1", instance="exec-a",
        )  # fmt: skip
        assert await bus.claim_effect(claimed, key_digest("k")) is None  # first on its subject
        redis_sentinels.kill_primary()
    redis_sentinels.wait_failover()
    retry = ClaimRequest(ns, "k", "fp", "r2", "exec-b", "n2", 600)
    assert isinstance(await _first_answer(store, retry), IndexLost)
    assert await rebuild_index(store, bus, lambda: datetime.now(UTC), "rebuilder", 600)
    again = await store.claim(retry)
    assert (again.state, again.owner_request_id) == (ClaimState.INFLIGHT, "r1")  # the first claim wins
    await client.aclose()


async def test_a_rebuild_running_across_a_failover_starts_over(redis_sentinels: SentinelGroup) -> None:
    client = redis_client(ServiceSettings(redis_url=redis_sentinels.url, redis_timeout_s=0.5))
    lock = RebuildLock(client, "tg:rebuild:idem", EPOCH_KEY)
    assert await lock.take("rebuilder-a")  # it restores records on the old primary…
    assert await client.execute_command("WAIT", 1, 2000) == 1  # …and the replica copies its lock
    redis_sentinels.kill_primary()
    promoted = redis_sentinels.wait_failover()
    with _raw(promoted) as raw:
        assert raw.exists("tg:rebuild:idem") == 1
    assert isinstance(await _first_answer(RedisIdempotencyStore(client), _claim("k", "r")), IndexLost)
    assert not await lock.renew("rebuilder-a")  # the copied lock is held by nobody
    assert not await lock.finish("rebuilder-a", "e2")  # so a half-restored index is never declared complete
    assert not await client.exists(EPOCH_KEY)
    assert await lock.take("rebuilder-b")  # at once, not after the copied lease
    await client.aclose()


def _users(client: aioredis.Redis) -> dict[str, Callable[[], Awaitable[object]]]:
    store, approvals = RedisIdempotencyStore(client), RedisApprovalStore(client)
    budgets, replays = RedisBudgetLedger(client), RedisReplayIndex(client)
    daily = Charge("daily", 1_796_083_200, 86_400, 1_000, 4_102_444_800)
    return {
        "executor claim": lambda: store.claim(_claim("k", "r9")),
        "approval read": lambda: approvals.get("ap-1"),
        "budget reservation": lambda: budgets.reserve("p", "r9", 1, [daily]),
        "replay check": lambda: replays.lookup("p", "k"),
    }


async def _raised(call: Callable[[], Awaitable[object]]) -> tuple[type[BaseException] | None, float]:
    started = time.monotonic()
    try:
        await call()
    except Exception as error:
        return type(error), time.monotonic() - started
    return None, time.monotonic() - started


async def test_every_redis_user_fails_closed_in_the_window_and_waits_for_its_rebuild_after(
    redis_sentinels: SentinelGroup,
) -> None:
    client = redis_client(ServiceSettings(redis_url=redis_sentinels.url, redis_timeout_s=0.5))
    for epoch_key in EPOCH_KEYS:
        await _rebuilt(client, epoch_key)
    assert await client.execute_command("WAIT", 1, 2000) == 1
    redis_sentinels.kill_primary()
    window = {name: await _raised(call) for name, call in _users(client).items()}
    assert {name: kind for name, (kind, _) in window.items()} == {
        "executor claim": IdempotencyStoreUnavailable,
        "approval read": ApprovalStoreUnavailable,
        "budget reservation": BudgetUnavailable,
        "replay check": PolicyError,
    }  # each a refusal its caller fails closed on (retry, or deny)
    assert max(seconds for _, seconds in window.values()) < 3.0  # never a hang
    redis_sentinels.wait_failover()
    await _first_answer(RedisIdempotencyStore(client), _claim("k", "r8"))
    after = {name: (await _raised(call))[0] for name, call in _users(client).items()}
    assert after == {
        "executor claim": IndexLost,
        "approval read": IndexLost,
        "budget reservation": BudgetsLost,
        "replay check": IndexLost,
    }  # every index waits for its rebuild from the stream
    await client.aclose()


def _digest(key: str) -> str:
    return key_digest(key)
