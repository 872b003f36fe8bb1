"""Spend budgets against a real redis-server: reserved at admission across policy replicas, never overspent.

The policy pipeline and the re-check run here over the real reservation script; two
"replicas" are two independent Redis clients, ledgers and sets of ports over one Redis.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import DecisionMade, ToolRequested, encode
from effectgate.contracts.rpc.recheck import RecheckQuery
from effectgate.contracts.tools.descriptors import RateLimit, ToolDescriptor
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.adapters.redis_budgets import RedisBudgetLedger
from effectgate.policy.adapters.redis_limiter import RedisRateLimiter
from effectgate.policy.budgets.rules import parse_budgets
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryReplayIndex
from effectgate.policy.pipeline.admission import Spending
from effectgate.policy.pipeline.recheck import recheck
from effectgate.policy.ports import ReplayState
from effectgate.policy.service import Envelope, PolicyPorts

pytestmark = pytest.mark.connected

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _descriptor(repo_root: Path) -> ToolDescriptor:
    """file_system with reads costing 1 and writes costing their ``/amount``, and a rate that never limits."""
    data = (repo_root / "deploy/tools/file_system.json").read_bytes()
    descriptor = msgspec.json.decode(data, type=ToolDescriptor)
    write = descriptor.operations["write"]
    schema = {**write.input_schema, "properties": {**write.input_schema["properties"], "amount": {"type": "number"}}}
    operations = {
        **descriptor.operations,
        "read": msgspec.structs.replace(descriptor.operations["read"], cost=1),
        "write": msgspec.structs.replace(write, cost="/amount", input_schema=schema),
    }
    return msgspec.structs.replace(descriptor, operations=operations, rate_limit=RateLimit(calls=10_000, period_s=1.0))


def _budgets(ns: str) -> str:
    return f"""
[[budgets]]
name = "reads"
principal = "{ns}"
tool = "file_system"
operation = "read"
limit = 10
window_s = 86400

[[budgets]]
name = "money"
principal = "*"
tool = "file_system"
operation = "write"
limit = 100
window_s = 3600
"""


@pytest_asyncio.fixture
async def epoch(redis_client: aioredis.Redis, ns: str) -> AsyncIterator[str]:
    key = f"tg:epoch:budgets:{ns}"
    await redis_client.set(key, "test")
    yield key
    await redis_client.delete(key)


def replica(repo_root: Path, ns: str, client: aioredis.Redis, epoch: str, **changes: Any) -> PolicyPorts:
    """One policy replica: its own Redis client, limiter, ledger and engine."""
    text = f'[principals.{ns}]\nautonomy = 1\nroles = ["agent"]\n[approvers.alice]\nroles = ["operator"]\n'
    text += (
        '[approvers.bob]\nroles = ["sre", "finance", "security"]\n[approvers.carol]\nroles = ["finance", "security"]\n'
    )
    engine = PolicyEngine((repo_root / "deploy/policy/policy.cedar").read_text(), PrincipalDirectory.from_toml(text))
    ledger = RedisBudgetLedger(client, timeout_s=2.0, epoch_key=epoch)
    ports = PolicyPorts(
        policy=PolicyHolder(engine),
        descriptors=InMemoryDescriptorSource([_descriptor(repo_root)]),
        limiter=RedisRateLimiter(client, timeout_s=2.0),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=65536,
        spending=Spending(parse_budgets(_budgets(ns)), ledger),
    )
    return PolicyPorts(**{**ports.__dict__, **changes})


@pytest.fixture
def ports(repo_root: Path, ns: str, redis_client: aioredis.Redis, epoch: str) -> PolicyPorts:
    return replica(repo_root, ns, redis_client, epoch)


async def ask(ports: PolicyPorts, principal: str, rid: str, operation: str = "read", **arguments: Any) -> DecisionMade:
    request = ToolRequested(
        event_id=rid,
        occurred_at=NOW,
        request_id=rid,
        tool="file_system",
        operation=operation,
        arguments={"path": "a.txt", **({"content": "x"} if operation == "write" else {}), **arguments},
        idempotency_key=f"k-{rid}",
    )
    return await decide(Envelope(principal=principal, data=encode(request), request_id=rid), ports)


async def test_eight_callers_on_two_replicas_get_exactly_the_budget(
    repo_root: Path, ns: str, redis_url: str, epoch: str
) -> None:
    """The issue's race: 8 tasks x 20 calls of cost 1 against a budget of 10, across 2 policy replicas."""
    clients = [aioredis.Redis.from_url(redis_url) for _ in range(2)]
    replicas = [replica(repo_root, ns, client, epoch) for client in clients]

    async def caller(task: int) -> list[DecisionMade]:
        return [await ask(replicas[task % 2], ns, f"t{task}c{call}") for call in range(20)]

    try:
        decisions = [d for calls in await asyncio.gather(*(caller(task) for task in range(8))) for d in calls]
    finally:
        for client in clients:
            await client.aclose()
    assert len(decisions) == 160
    assert sum(d.verdict is Verdict.EXECUTE for d in decisions) == 10
    refused = [d for d in decisions if d.verdict is not Verdict.EXECUTE]
    assert {(d.verdict, d.reason_code) for d in refused} == {(Verdict.DENY, "budget_exceeded")}
    window_left_s = 12 * 3600.0  # NOW is noon UTC: the daily window resets at midnight
    assert {d.retry_after_s for d in refused} == {window_left_s}
    assert "budget reads of" in (refused[0].reason or "") and "10 reserved of 10" in (refused[0].reason or "")


async def test_amounts_fit_exactly_at_the_limit(ports: PolicyPorts, ns: str) -> None:
    assert (await ask(ports, ns, "m1", "write", amount=99.99)).verdict is Verdict.NEEDS_APPROVAL, "nothing yet"
    grants = [await ask(ports, ns, rid, "write", amount=amount) for rid, amount in (("m1", 99.99), ("m2", 0.01))]
    answers = [await recheck(_grant(d), ports, lambda: NOW) for d in grants]
    assert [(a.allowed, a.reason_code) for a in answers] == [(True, "still_allowed")] * 2
    over = await ask(ports, ns, "m3", "write", amount=0.0001)  # no approval is asked for a call that cannot fit
    assert (over.verdict, over.reason_code) == (Verdict.DENY, "budget_exceeded")
    assert "100 reserved of 100" in (over.reason or "") and "costs 0.0001" in (over.reason or "")
    assert over.retry_after_s == 3600.0, "the hourly window resets at 13:00"


async def test_room_at_the_decision_is_taken_again_at_the_grants_admission(ports: PolicyPorts, ns: str) -> None:
    first, second = [await ask(ports, ns, rid, "write", amount=60) for rid in ("f1", "f2")]
    assert (first.verdict, second.verdict) == (Verdict.NEEDS_APPROVAL, Verdict.NEEDS_APPROVAL), "both fit, neither ran"
    assert (await recheck(_grant(first), ports, lambda: NOW)).allowed
    late = await recheck(_grant(second), ports, lambda: NOW)
    assert (late.allowed, late.reason_code) == (False, "budget_exceeded"), "60 + 60 > 100 when the second is granted"


def _grant(decision: DecisionMade) -> RecheckQuery:
    assert decision.request is not None and decision.request_hash is not None
    return RecheckQuery(
        principal=decision.principal,
        request=decision.request,
        request_hash=decision.request_hash,
        approver="alice",
        admit_request_id=decision.request_id,
    )


async def test_a_grant_rechecked_again_is_charged_once(ports: PolicyPorts, ns: str) -> None:
    write = await ask(ports, ns, "w1", "write", amount=60)
    answers = await asyncio.gather(*(recheck(_grant(write), ports, lambda: NOW) for _ in range(10)))
    assert {a.allowed for a in answers} == {True}
    rest = await recheck(_grant(await ask(ports, ns, "w2", "write", amount=40)), ports, lambda: NOW)
    assert (rest.allowed, rest.reason_code) == (True, "still_allowed"), "60 + 40 = 100: the first counted once"
    over = await ask(ports, ns, "w3", "write", amount=0.0001)
    assert (over.verdict, over.reason_code) == (Verdict.DENY, "budget_exceeded")


async def test_a_replay_reserves_nothing(repo_root: Path, ns: str, redis_client: aioredis.Redis, epoch: str) -> None:
    replays = InMemoryReplayIndex()
    ports = replica(repo_root, ns, redis_client, epoch, replays=replays)
    assert all([(await ask(ports, ns, f"r{n}")).verdict is Verdict.EXECUTE for n in range(10)])
    done = await ask(ports, ns, "r0")
    assert done.request_hash is not None
    replays.states[(ns, "k-again")] = ReplayState(done=True, fingerprint=done.request_hash)
    request = ToolRequested(
        event_id="again",
        occurred_at=NOW,
        request_id="again",
        tool="file_system",
        operation="read",
        arguments={"path": "a.txt"},
        idempotency_key="k-again",
    )
    replay = await decide(Envelope(principal=ns, data=encode(request), request_id="again"), ports)
    assert (replay.verdict, replay.reason_code) == (Verdict.EXECUTE, "idempotent_replay"), "the budget is spent"


async def test_a_cost_that_cannot_be_known_denies(ports: PolicyPorts, ns: str) -> None:
    for arguments, why in (({}, "no cost at /amount"), ({"amount": -5}, "at least 0")):
        write = await ask(ports, ns, f"w{len(why)}", "write", **arguments)
        assert (write.verdict, write.reason_code) == (Verdict.DENY, "budget_cost_unknown")
        assert why in (write.reason or "")


async def test_an_unreachable_or_lost_ledger_denies(
    repo_root: Path, ns: str, redis_client: aioredis.Redis, epoch: str
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    down = aioredis.Redis(port=port, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    try:
        broken = replica(repo_root, ns, redis_client, epoch)
        spending = Spending(broken.spending.book if broken.spending else parse_budgets(""), RedisBudgetLedger(down))
        broken = PolicyPorts(**{**broken.__dict__, "spending": spending})
        read = await ask(broken, ns, "r1")
        assert (read.verdict, read.reason_code) == (Verdict.DENY, "budget_unavailable")
    finally:
        await down.aclose()
    await redis_client.delete(epoch)
    lost = await ask(replica(repo_root, ns, redis_client, epoch), ns, "r2")
    assert (lost.verdict, lost.reason_code) == (Verdict.DENY, "budget_unavailable")
    assert "rebuilt from the stream" in (lost.reason or "")
