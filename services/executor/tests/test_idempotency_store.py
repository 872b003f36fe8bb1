"""The idempotency index: the same semantics in memory and on a real Redis."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import time

import pytest
import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.retry import Retry

from effectgate.contracts.errors import IndexLost
from effectgate.executor.adapters.redis_idempotency import RedisIdempotencyStore
from effectgate.executor.domain import Claim, ClaimState
from effectgate.executor.errors import IdempotencyStoreUnavailable
from effectgate.executor.memory import InMemoryIdempotencyStore
from effectgate.executor.ports import ClaimRequest, IdempotencyStore, Restored
from effectgate.shared.stores.idempotency import EPOCH_KEY, key_digest, record_key

TTL_S = 30.0


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.connected)])
async def store(request: pytest.FixtureRequest, redis_client: aioredis.Redis) -> IdempotencyStore:
    if request.param == "memory":
        return InMemoryIdempotencyStore()
    await redis_client.set(EPOCH_KEY, "test")
    return RedisIdempotencyStore(redis_client)


@pytest.fixture
def principal(ns: str) -> str:
    return f"agent-{ns}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def claim_key(
    store: IdempotencyStore,
    principal: str,
    key: str,
    fingerprint: str,
    request_id: str,
    ttl_s: float = TTL_S,
    nonce: str | None = None,
    instance: str = "exec-1",
) -> Claim:
    request = ClaimRequest(principal, key, fingerprint, request_id, instance, nonce or f"n-{time.time_ns()}", ttl_s)
    return await store.claim(request)


async def test_first_claim_is_new_and_owned_by_the_claimer(store: IdempotencyStore, principal: str) -> None:
    before = now_ms()
    claim = await claim_key(store, principal, "key-1", "fp-a", "req-1", TTL_S)
    assert (claim.state, claim.owner_request_id, claim.receipt) == (ClaimState.NEW, "req-1", None)
    assert claim.claimed_at_ms is not None
    assert before - 1000 <= claim.claimed_at_ms <= now_ms() + 1000


async def test_second_claim_while_in_flight_names_the_owner(store: IdempotencyStore, principal: str) -> None:
    first = await claim_key(store, principal, "key-1", "fp-a", "req-1", TTL_S)
    second = await claim_key(store, principal, "key-1", "fp-a", "req-2", TTL_S)
    assert second == Claim(ClaimState.INFLIGHT, "req-1", None, first.claimed_at_ms, "exec-1")


async def test_a_redelivery_of_the_owner_is_in_flight_not_new(store: IdempotencyStore, principal: str) -> None:
    await claim_key(store, principal, "key-1", "fp-a", "req-1", TTL_S)
    again = await claim_key(store, principal, "key-1", "fp-a", "req-1", TTL_S)
    assert (again.state, again.owner_request_id) == (ClaimState.INFLIGHT, "req-1")


async def test_same_key_with_another_fingerprint_is_a_mismatch(store: IdempotencyStore, principal: str) -> None:
    await claim_key(store, principal, "key-1", "fp-a", "req-1", TTL_S)
    claim = await claim_key(store, principal, "key-1", "fp-b", "req-2", TTL_S)
    assert claim.state is ClaimState.MISMATCH
    assert claim.receipt is None
    await store.complete(principal, "key-1", "req-1", b"receipt", TTL_S)
    after_done = await claim_key(store, principal, "key-1", "fp-b", "req-3", TTL_S)
    assert after_done.state is ClaimState.MISMATCH
    assert after_done.receipt is None, "a mismatching request never sees the stored receipt"


async def test_completed_claim_replays_the_stored_receipt(store: IdempotencyStore, principal: str) -> None:
    first = await claim_key(store, principal, "key-1", "fp-a", "req-1", TTL_S)
    receipt = b'{"outcome":"succeeded"}\x00\xff binary-safe'
    assert await store.complete(principal, "key-1", "req-1", receipt, TTL_S) is True
    replay = await claim_key(store, principal, "key-1", "fp-a", "req-2", TTL_S)
    assert replay == Claim(ClaimState.DONE, "req-1", receipt, first.claimed_at_ms, "exec-1")


async def test_only_the_owner_completes(store: IdempotencyStore, principal: str) -> None:
    await claim_key(store, principal, "key-1", "fp-a", "req-1", TTL_S)
    assert await store.complete(principal, "key-1", "req-2", b"forged", TTL_S) is False
    assert (await claim_key(store, principal, "key-1", "fp-a", "req-3", TTL_S)).state is ClaimState.INFLIGHT
    assert await store.complete(principal, "key-1", "req-1", b"real", TTL_S) is True
    assert await store.complete(principal, "key-1", "req-1", b"real", TTL_S) is True, "a retried completion"
    assert await store.complete(principal, "key-1", "req-1", b"other", TTL_S) is False
    assert (await claim_key(store, principal, "key-1", "fp-a", "req-3", TTL_S)).receipt == b"real"


async def test_complete_without_a_claim_stores_nothing(store: IdempotencyStore, principal: str) -> None:
    assert await store.complete(principal, "never-claimed", "req-1", b"r", TTL_S) is False
    assert (await claim_key(store, principal, "never-claimed", "fp", "req-2", TTL_S)).state is ClaimState.NEW


async def test_keys_are_scoped_by_principal(store: IdempotencyStore, principal: str) -> None:
    await claim_key(store, principal, "shared-key", "fp-a", "req-1", TTL_S)
    other = await claim_key(store, principal + "-other", "shared-key", "fp-b", "req-2", TTL_S)
    assert other.state is ClaimState.NEW


async def test_twenty_concurrent_claims_give_exactly_one_new(store: IdempotencyStore, principal: str) -> None:
    claims = await asyncio.gather(*(claim_key(store, principal, "race", "fp-a", f"req-{i}", TTL_S) for i in range(20)))
    winners = [c for c in claims if c.state is ClaimState.NEW]
    assert len(winners) == 1
    losers = [c for c in claims if c.state is not ClaimState.NEW]
    assert {c.state for c in losers} == {ClaimState.INFLIGHT}
    assert {c.owner_request_id for c in losers} == {winners[0].owner_request_id}


async def test_records_expire_after_their_ttl(store: IdempotencyStore, principal: str) -> None:
    await claim_key(store, principal, "lease", "fp-a", "req-1", 0.2)
    await claim_key(store, principal, "kept", "fp-a", "req-1", 0.2)
    assert await store.complete(principal, "kept", "req-1", b"r", 5.0) is True
    await asyncio.sleep(0.35)
    again = await claim_key(store, principal, "lease", "fp-b", "req-2", TTL_S)
    assert (again.state, again.owner_request_id) == (ClaimState.NEW, "req-2")
    assert await store.complete(principal, "lease", "req-1", b"late", TTL_S) is False
    kept = await claim_key(store, principal, "kept", "fp-a", "req-3", TTL_S)
    assert kept.state is ClaimState.DONE, "complete extends the record to the retention ttl"


async def test_take_over_hands_an_inflight_record_to_a_new_owner(store: IdempotencyStore, principal: str) -> None:
    first = await claim_key(store, principal, "key-1", "fp-a", "req-1", TTL_S)
    assert first.claimed_at_ms is not None
    await asyncio.sleep(0.01)
    assert await store.take_over(principal, "key-1", "req-9", "req-2") is False, "owner-checked"
    assert await store.take_over(principal, "key-1", "req-1", "req-2") is True
    seen = await claim_key(store, principal, "key-1", "fp-a", "req-3", TTL_S)
    assert (seen.state, seen.owner_request_id) == (ClaimState.INFLIGHT, "req-2")
    assert seen.claimed_at_ms is not None and seen.claimed_at_ms > first.claimed_at_ms
    assert await store.complete(principal, "key-1", "req-1", b"stale", TTL_S) is False
    assert await store.complete(principal, "key-1", "req-2", b"fresh", TTL_S) is True


async def test_take_over_refuses_done_and_absent_records(store: IdempotencyStore, principal: str) -> None:
    await claim_key(store, principal, "key-1", "fp-a", "req-1", TTL_S)
    await store.complete(principal, "key-1", "req-1", b"r", TTL_S)
    assert await store.take_over(principal, "key-1", "req-1", "req-2") is False
    assert await store.take_over(principal, "absent", "req-1", "req-2") is False


async def test_a_non_positive_ttl_is_rejected(store: IdempotencyStore, principal: str) -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        await claim_key(store, principal, "key-1", "fp-a", "req-1", 0)


async def test_in_memory_expiry_follows_the_injected_clock() -> None:
    clock = [1_000]
    store = InMemoryIdempotencyStore(clock_ms=lambda: clock[0])
    first = await claim_key(store, "p", "k", "fp", "req-1", 1.0)
    clock[0] += 999
    during = await claim_key(store, "p", "k", "fp", "req-2", 1.0)
    clock[0] += 1
    after = await claim_key(store, "p", "k", "fp", "req-3", 1.0)
    assert (first.claimed_at_ms, during.state) == (1_000, ClaimState.INFLIGHT)
    assert (after.state, after.claimed_at_ms) == (ClaimState.NEW, 2_000)


# --- Redis only --------------------------------------------------------------------------------


@pytest.mark.connected
async def test_redis_key_hides_the_idempotency_key(redis_client: aioredis.Redis, principal: str) -> None:
    store = RedisIdempotencyStore(redis_client)
    raw_key = "customer-42:refund:secret-looking-key"
    await claim_key(store, principal, raw_key, "fp-a", "req-1", TTL_S)
    keys = [k.decode() for k in await redis_client.keys(f"tg:idem:{{{principal}}}:*")]
    expected = f"tg:idem:{{{principal}}}:{hashlib.sha256(raw_key.encode()).hexdigest()}"
    keys = [k for k in keys]
    assert keys == [expected] == [record_key(principal, raw_key)]
    assert raw_key not in keys[0]
    assert 0 < await redis_client.pttl(expected) <= TTL_S * 1000


@pytest.mark.connected
async def test_redis_claimed_at_comes_from_the_server_clock(redis_client: aioredis.Redis, principal: str) -> None:
    store = RedisIdempotencyStore(redis_client)
    seconds, micros = await redis_client.time()
    claim = await claim_key(store, principal, "clock", "fp", "req-1", TTL_S)
    assert claim.claimed_at_ms is not None
    assert 0 <= claim.claimed_at_ms - (seconds * 1000 + micros // 1000) < 1000


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_unreachable_redis_is_store_unavailable() -> None:
    client = aioredis.Redis(
        host="127.0.0.1",
        port=closed_port(),
        socket_timeout=0.2,
        socket_connect_timeout=0.2,
        retry=Retry(NoBackoff(), 0),
    )
    store = RedisIdempotencyStore(client)
    try:
        calls = [
            claim_key(store, "p", "k", "fp", "req-1", TTL_S),
            store.complete("p", "k", "req-1", b"r", TTL_S),
            store.take_over("p", "k", "req-1", "req-2"),
        ]
        for call in calls:
            started = time.monotonic()
            with pytest.raises(IdempotencyStoreUnavailable) as caught:
                await call
            assert caught.value.reason_code == "idempotency_store_unavailable"
            assert caught.value.transient
            assert time.monotonic() - started < 2.0
    finally:
        await client.aclose()


async def test_a_silent_redis_is_store_unavailable_within_the_timeout() -> None:
    release = asyncio.Event()

    async def accept_and_stay_silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await release.wait()
        writer.close()

    server = await asyncio.start_server(accept_and_stay_silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = aioredis.Redis(host="127.0.0.1", port=port, socket_timeout=5, retry=Retry(NoBackoff(), 0))
    store = RedisIdempotencyStore(client, timeout_s=0.3)
    try:
        started = time.monotonic()
        with pytest.raises(IdempotencyStoreUnavailable):
            await claim_key(store, "p", "k", "fp", "req-1", TTL_S)
        assert time.monotonic() - started < 2.0
    finally:
        release.set()
        await client.aclose()
        server.close()
        await server.wait_closed()


async def test_the_same_claim_retried_is_new_again_and_only_with_its_nonce(
    store: IdempotencyStore, principal: str
) -> None:
    first = await claim_key(store, principal, "k", "fp", "req-1", nonce="n1")
    retried = await claim_key(store, principal, "k", "fp", "req-1", nonce="n1")
    redelivered = await claim_key(store, principal, "k", "fp", "req-1", nonce="n2")
    assert (first.state, retried.state, redelivered.state) == (ClaimState.NEW, ClaimState.NEW, ClaimState.INFLIGHT)


async def test_an_ended_request_can_never_claim_and_a_started_one_cannot_be_ended(
    store: IdempotencyStore, principal: str
) -> None:
    assert await store.end_request(principal, "req-ended", TTL_S)
    assert await store.end_request(principal, "req-ended", TTL_S), "ending again (a retried call) still holds"
    assert (await claim_key(store, principal, "k", "fp", "req-ended")).state is ClaimState.ENDED
    assert (await claim_key(store, principal, "k2", "fp", "req-run")).state is ClaimState.NEW
    assert not await store.end_request(principal, "req-run", TTL_S), "a request whose run started was ended"


async def test_release_drops_only_the_owners_unfinished_record(store: IdempotencyStore, principal: str) -> None:
    await claim_key(store, principal, "k", "fp", "req-1")
    assert not await store.release(principal, "k", "req-2")
    assert await store.release(principal, "k", "req-1")
    assert (await claim_key(store, principal, "k", "fp", "req-3")).state is ClaimState.NEW
    await store.complete(principal, "k", "req-3", b"receipt", TTL_S)
    assert not await store.release(principal, "k", "req-3"), "a completed record was released"


async def test_take_over_retried_still_holds(store: IdempotencyStore, principal: str) -> None:
    await claim_key(store, principal, "k", "fp", "req-1")
    assert await store.take_over(principal, "k", "req-1", "req-2")
    assert await store.take_over(principal, "k", "req-1", "req-2")
    assert not await store.take_over(principal, "k", "req-1", "req-3")


async def test_a_missing_epoch_is_index_lost_not_key_unused(store: IdempotencyStore, principal: str) -> None:
    await store.set_epoch("e1")
    assert await store.has_epoch()
    if isinstance(store, InMemoryIdempotencyStore):
        store.lose_everything()
    else:
        await store._redis.delete(EPOCH_KEY)  # type: ignore[attr-defined]
    with pytest.raises(IndexLost):
        await claim_key(store, principal, "k", "fp", "req-1")
    with pytest.raises(IndexLost):
        await store.end_request(principal, "req-1", TTL_S)
    await store.set_epoch("e2")


async def test_restored_records_answer_like_the_originals(store: IdempotencyStore, principal: str) -> None:
    done = Restored(fingerprint="fp", owner="req-1", instance="x", claimed_at_ms=5, receipt=b"r", ttl_s=60)
    running = Restored(fingerprint="fp", owner="req-2", instance="exec-9", claimed_at_ms=7, receipt=None, ttl_s=60)
    await store.restore(principal, key_digest("k1"), done)
    await store.restore(principal, key_digest("k2"), running)
    assert await claim_key(store, principal, "k1", "fp", "req-3") == Claim(ClaimState.DONE, "req-1", b"r", 5, "x")
    assert await claim_key(store, principal, "k2", "fp", "req-4") == Claim(
        ClaimState.INFLIGHT, "req-2", None, 7, "exec-9"
    )
    assert not await store.end_request(principal, "req-2", TTL_S), "a restored run could be ended as never started"


async def test_heartbeats_and_the_rebuild_lock(store: IdempotencyStore, principal: str) -> None:
    instance = f"exec-{principal}"
    assert not await store.is_alive(instance)
    await store.heartbeat(instance, 0.3)
    assert await store.is_alive(instance)
    await asyncio.sleep(0.4)
    assert not await store.is_alive(instance)
    owner = f"owner-{principal}"
    if isinstance(store, RedisIdempotencyStore):
        await store._redis.delete("tg:rebuild:idem")  # type: ignore[attr-defined]
    assert await store.lock_rebuild(owner, 5)
    assert not await store.lock_rebuild(owner, 5), "a held lock was taken again instead of renewed"
    assert not await store.lock_rebuild("someone-else", 5)
    assert await store.renew_rebuild(owner, 5) and not await store.renew_rebuild("someone-else", 5)
    assert not await store.finish_rebuild("someone-else", "e-other")
    assert await store.finish_rebuild(owner, "e-new") and await store.has_epoch()
    assert not await store.renew_rebuild(owner, 5), "a finished rebuild still held its lock"
