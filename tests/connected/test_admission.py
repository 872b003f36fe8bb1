"""Admission against a real redis-server: the budget is taken when a call is admitted, once per request id.

The policy pipeline and the re-check run here over the real GCRA script (one Lua script
per call, keyed by the request id), concurrently where a redelivery or a retried re-check
could race.
"""

from __future__ import annotations

import asyncio
import socket
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import DecisionMade, ToolRequested, encode
from effectgate.contracts.rpc.recheck import RecheckQuery
from effectgate.contracts.tools.descriptors import RateLimit, ToolDescriptor
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.adapters.redis_limiter import RedisRateLimiter
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.domain import admitted_key, limiter_key
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryReplayIndex
from effectgate.policy.pipeline.recheck import recheck
from effectgate.policy.service import Envelope, PolicyPorts

pytestmark = pytest.mark.connected

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
CALLS = 5


def _ports(repo_root: Path, ns: str, client: aioredis.Redis, rate: RateLimit) -> PolicyPorts:
    text = f'[principals.{ns}]\nautonomy = 1\nroles = ["agent"]\n[approvers.alice]\nroles = ["operator"]\n'
    text += (
        '[approvers.bob]\nroles = ["sre", "finance", "security"]\n[approvers.carol]\nroles = ["finance", "security"]\n'
    )
    engine = PolicyEngine((repo_root / "deploy/policy/policy.cedar").read_text(), PrincipalDirectory.from_toml(text))
    data = (repo_root / "deploy/tools/file_system.json").read_bytes()
    descriptor = msgspec.structs.replace(msgspec.json.decode(data, type=ToolDescriptor), rate_limit=rate)
    return PolicyPorts(
        policy=PolicyHolder(engine),
        descriptors=InMemoryDescriptorSource([descriptor]),
        limiter=RedisRateLimiter(client, timeout_s=2.0, admitted_ttl_s=600.0),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=65536,
    )


@pytest.fixture
def ports(repo_root: Path, ns: str, redis_client: aioredis.Redis) -> PolicyPorts:
    return _ports(repo_root, ns, redis_client, RateLimit(calls=CALLS, period_s=600.0))


async def _decide(ports: PolicyPorts, principal: str, operation: str, rid: str) -> DecisionMade:
    arguments = {"path": "a.txt", "content": "x"} if operation == "write" else {"path": "a.txt"}
    request = ToolRequested(
        event_id=rid,
        occurred_at=NOW,
        request_id=rid,
        tool="file_system",
        operation=operation,
        arguments=arguments,
        idempotency_key=f"k-{rid}",
    )
    return await decide(Envelope(principal=principal, data=encode(request), request_id=rid), ports)


def _grant_query(decision: DecisionMade, admit: bool = True) -> RecheckQuery:
    assert decision.request is not None and decision.request_hash is not None
    return RecheckQuery(
        principal=decision.principal,
        request=decision.request,
        request_hash=decision.request_hash,
        approver="alice",
        admit_request_id=decision.request_id if admit else None,
    )


async def _remaining_reads(ports: PolicyPorts, ns: str) -> int:
    """How many more reads the principal is admitted now (spends them)."""
    codes = [(await _decide(ports, ns, "read", f"probe{n}")).reason_code for n in range(CALLS + 1)]
    assert codes[-1] == "rate_limited", codes
    return codes.count("permitted")


async def test_pending_approvals_take_nothing_and_leave_nothing_in_redis(
    ports: PolicyPorts, ns: str, redis_client: aioredis.Redis
) -> None:
    writes = await asyncio.gather(*(_decide(ports, ns, "write", f"w{n}") for n in range(3 * CALLS)))
    assert {w.verdict for w in writes} == {Verdict.NEEDS_APPROVAL}
    assert await redis_client.keys(f"tg:rl:{{{ns}}}:*") == []
    assert await _remaining_reads(ports, ns) == CALLS


async def test_a_request_redelivered_concurrently_is_counted_once(
    ports: PolicyPorts, ns: str, redis_client: aioredis.Redis
) -> None:
    decisions = await asyncio.gather(*(_decide(ports, ns, "read", "same") for _ in range(20)))
    assert {d.verdict for d in decisions} == {Verdict.EXECUTE}
    assert await redis_client.exists(admitted_key(ns, "same")) == 1
    assert await _remaining_reads(ports, ns) == CALLS - 1


async def test_a_grant_rechecked_concurrently_is_admitted_once(ports: PolicyPorts, ns: str) -> None:
    write = await _decide(ports, ns, "write", "w1")
    answers = await asyncio.gather(*(recheck(_grant_query(write), ports, lambda: NOW) for _ in range(20)))
    assert {(a.allowed, a.admitted_request_id) for a in answers} == {(True, "w1")}
    assert await _remaining_reads(ports, ns) == CALLS - 1


async def test_the_approvals_services_recheck_takes_nothing(ports: PolicyPorts, ns: str) -> None:
    write = await _decide(ports, ns, "write", "w1")
    for _ in range(10):
        assert (await recheck(_grant_query(write, admit=False), ports, lambda: NOW)).allowed
    assert await _remaining_reads(ports, ns) == CALLS


async def test_a_grant_over_the_rate_takes_nothing_and_runs_once_the_rate_allows(
    repo_root: Path, ns: str, redis_client: aioredis.Redis
) -> None:
    ports = _ports(repo_root, ns, redis_client, RateLimit(calls=2, period_s=1.0))
    write = await _decide(ports, ns, "write", "w1")
    assert [(await _decide(ports, ns, "read", f"r{n}")).verdict for n in range(2)] == [Verdict.EXECUTE] * 2
    refused = await recheck(_grant_query(write), ports, lambda: NOW)
    assert (refused.allowed, refused.reason_code) == (False, "rate_limited")
    assert refused.retry_after_s is not None and 0 < refused.retry_after_s <= 0.5
    assert await redis_client.exists(admitted_key(ns, "w1")) == 0, "a refused admission left a marker"
    await asyncio.sleep(refused.retry_after_s + 0.05)
    assert (await recheck(_grant_query(write), ports, lambda: NOW)).allowed
    assert (await _decide(ports, ns, "read", "r9")).reason_code == "rate_limited", "the grant was not counted"


async def test_each_operation_with_its_own_rate_has_its_own_bucket(
    ports: PolicyPorts, ns: str, redis_client: aioredis.Redis
) -> None:
    descriptor = await ports.descriptors.get("file_system")
    assert descriptor is not None
    spec = msgspec.structs.replace(descriptor.operations["list"], rate_limit=RateLimit(calls=1, period_s=600.0))
    own = msgspec.structs.replace(descriptor, operations={**descriptor.operations, "list": spec})
    ports = PolicyPorts(**{**ports.__dict__, "descriptors": InMemoryDescriptorSource([own])})
    assert [(await _decide(ports, ns, "list", f"l{n}")).reason_code for n in range(2)] == ["permitted", "rate_limited"]
    assert await redis_client.exists(limiter_key(ns, "file_system.list")) == 1
    assert await _remaining_reads(ports, ns) == CALLS


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_an_unreachable_redis_admits_nothing(ports: PolicyPorts, ns: str) -> None:
    down = aioredis.Redis(
        host="127.0.0.1", port=_closed_port(), socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)
    )
    try:
        broken = PolicyPorts(**{**ports.__dict__, "limiter": RedisRateLimiter(down)})
        write = await _decide(broken, ns, "write", "w1")
        assert write.verdict is Verdict.NEEDS_APPROVAL, "a call that waits for approval needs no limiter"
        read = await _decide(broken, ns, "read", "r1")
        assert (read.verdict, read.reason_code) == (Verdict.DENY, "rate_limiter_unavailable")
        answer = await recheck(_grant_query(write), broken, lambda: NOW)
        assert (answer.allowed, answer.reason_code) == (False, "rate_limiter_unavailable")
    finally:
        await down.aclose()
