"""A Redis restarted on the same port is used at once: stale pooled sockets are reconnected, claims stay exact."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from effectgate.approvals.adapters.redis_store import EPOCH as APPROVALS_EPOCH
from effectgate.approvals.adapters.redis_store import RedisApprovalStore
from effectgate.approvals.domain import PendingApproval
from effectgate.contracts.events import BoundRequest
from effectgate.contracts.tools.descriptors import RateLimit
from effectgate.devstack.servers import ServerProcess, redis_server
from effectgate.executor.adapters.redis_idempotency import RedisIdempotencyStore
from effectgate.executor.domain import ClaimState
from effectgate.executor.ports import ClaimRequest
from effectgate.policy.adapters.redis_limiter import RedisRateLimiter
from effectgate.policy.adapters.redis_replays import RedisReplayIndex
from effectgate.shared.config.settings import ServiceSettings
from effectgate.shared.runtime.connections import redis_client
from effectgate.shared.stores.idempotency import EPOCH_KEY

pytestmark = [pytest.mark.connected, pytest.mark.fault]


@pytest.fixture
def persistent_redis(tmp_path: Path) -> Iterator[ServerProcess]:
    with redis_server(tmp_path / "redis", persistent=True) as server:
        yield server


def _pending(approval_id: str) -> PendingApproval:
    bound = BoundRequest(
        principal="p", tool="t", version="1.0.0", descriptor_digest="sha256:d", operation="o", arguments={}
    )
    expires = datetime.now(UTC) + timedelta(minutes=5)
    return PendingApproval(
        approval_id=approval_id,
        request_id="r",
        principal="p",
        request_hash="sha256:h",
        approver_role="operator",
        expires_at=expires,
        request=bound,
    )


async def test_every_store_answers_its_first_call_after_a_restart(persistent_redis: ServerProcess) -> None:
    client = redis_client(ServiceSettings(redis_url=persistent_redis.url, redis_timeout_s=1.0))
    await client.set(EPOCH_KEY, "e")
    await client.set(APPROVALS_EPOCH, "e")
    replays, limiter = RedisReplayIndex(client), RedisRateLimiter(client)
    approvals, idempotency = RedisApprovalStore(client), RedisIdempotencyStore(client)
    await approvals.open(_pending("ap-1"), datetime.now(UTC))
    calls: list[tuple[str, Any]] = [
        ("replay lookup", lambda: replays.lookup("p", "k")),
        ("rate limit script", lambda: limiter.admit("p", "t", RateLimit(calls=100, period_s=60), "r")),
        ("approval read", lambda: approvals.get("ap-1")),
        ("approval list", lambda: approvals.list_pending()),
        ("vote script", lambda: approvals.vote("ap-1", "alice", 2, "t1")),
        ("claim script", lambda: idempotency.claim(ClaimRequest("p", "k2", "fp", "r2", "exec", "n", 60))),
    ]
    for name, call in calls:
        persistent_redis.restart()
        try:
            await call()
        except Exception as error:
            pytest.fail(f"{name} failed on its first call after a Redis restart: {error!r}")
    await client.aclose()


async def test_a_claim_retried_after_a_broken_connection_is_still_exact(persistent_redis: ServerProcess) -> None:
    client = redis_client(ServiceSettings(redis_url=persistent_redis.url, redis_timeout_s=1.0))
    await client.set(EPOCH_KEY, "e")
    store = RedisIdempotencyStore(client)
    request = ClaimRequest("p", "k", "fp", "r1", "exec", "nonce-1", 60)
    assert (await store.claim(request)).state is ClaimState.NEW
    persistent_redis.restart()
    again = await store.claim(request)  # the same claim, retried: the first reply was lost
    other = await store.claim(ClaimRequest("p", "k", "fp", "r2", "exec", "nonce-2", 60))
    assert (again.state, other.state, other.owner_request_id) == (ClaimState.NEW, ClaimState.INFLIGHT, "r1")
    await client.aclose()
