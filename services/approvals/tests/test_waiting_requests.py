"""What may still open an approval, read from a real stream: answers before an approval opens.

A NATS server of its own (its consumers' acknowledgement floors are this test's alone) and
the session's Redis: the approvals service's stream bus and Redis store, as in production.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import nats
import pytest
import redis.asyncio as aioredis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client
from nats.js import JetStreamContext

from effectgate.approvals.adapters.redis_store import RedisApprovalStore
from effectgate.approvals.adapters.stream import StreamApprovalsBus
from effectgate.approvals.domain import DecideCommand
from effectgate.approvals.early import EarlyAnswers
from effectgate.approvals.service import Approvals
from effectgate.contracts.approval_ids import approval_id_for
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import BoundRequest, DecisionMade, encode
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Verdict
from effectgate.devstack.executor_reading import no_files_read
from effectgate.devstack.servers import nats_server
from effectgate.shared.runtime.reporting import SecurityReporter
from effectgate.shared.stores.provision import ensure_bus

pytestmark = pytest.mark.connected

POLICY = Ed25519PrivateKey.generate()
AGENT = "demo-agent"


@pytest.fixture(scope="module")
def own_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A NATS server with JetStream for this module only."""
    with nats_server(tmp_path_factory.mktemp("waiting-nats")) as server:
        yield server.url


@dataclass
class Stack:
    nc: Client
    js: JetStreamContext
    approvals: Approvals
    reports: list[Any]
    ns: str

    async def request(self, rid: str, *, body_id: str | None = None, headers: dict[str, str] | None = None) -> None:
        """Store a tool request of ``AGENT`` as the SDK sends it (``Nats-Msg-Id`` = its request id)."""
        body = {"type": "tool.requested", "request_id": self.ns + rid if body_id is None else body_id}
        sent = {"Nats-Msg-Id": self.ns + rid, **(headers or {})}
        await self.js.publish(Subjects.request(AGENT), json.dumps(body).encode(), stream=catalog.STREAM, headers=sent)

    async def decide(self, rid: str, verdict: Verdict, *, copy: bool) -> DecisionMade:
        """The policy's part: its signed decision on ``rid`` (and the copy when it needs approval), then its ack."""
        decision = sign_event(_decision(self.ns + rid, verdict), POLICY)
        await self.js.publish(Subjects.decision(AGENT, self.ns + rid), encode(decision), stream=catalog.STREAM)
        if copy:
            copy_subject = Subjects.needs_approval(AGENT, self.ns + rid)
            await self.js.publish(copy_subject, encode(decision), stream=catalog.STREAM)
        await _ack_all(self.js, catalog.POLICY_CONSUMER.durable)
        return decision

    async def answer(self, approver: str, rid: str, approve: bool = True) -> Any:
        command = DecideCommand(approval_id=approval_id_for(AGENT, self.ns + rid), approve=approve)
        reply = await self.approvals.answer(approver, command)
        await self.approvals.reporter.flush()
        return reply


def _decision(request_id: str, verdict: Verdict) -> DecisionMade:
    bound = BoundRequest(
        principal=AGENT, tool="file_system", version="1.0.0", descriptor_digest="d", operation="write", arguments={}
    )
    return DecisionMade(
        event_id=f"d-{request_id}",
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        principal=AGENT,
        verdict=verdict,
        reason_code="r",
        reason="r",
        idempotency_key=f"k-{request_id}",
        request=bound,
        request_hash=f"sha256:{request_id}",
        approver_role="operator",
    )


async def _ack_all(js: JetStreamContext, durable: str) -> None:
    """Take and acknowledge everything ``durable`` holds (its service handled it)."""
    subscription = await js.pull_subscribe_bind(durable=durable, stream=catalog.STREAM)
    while True:
        try:
            messages = await subscription.fetch(100, timeout=0.2)
        except (TimeoutError, nats.errors.TimeoutError):
            break
        for message in messages:
            await message.ack_sync()
    await subscription.unsubscribe()


@pytest.fixture
async def stack(own_nats: str, redis_client: aioredis.Redis, ns: str) -> AsyncIterator[Stack]:
    nc = await nats.connect(own_nats)
    js = nc.jetstream()
    await ensure_bus(js)
    for spec in (catalog.POLICY_CONSUMER, catalog.APPROVALS_CONSUMER):
        await _ack_all(js, spec.durable)  # what earlier tests left was handled
    await redis_client.set("tg:epoch:approvals", "test")
    bus = StreamApprovalsBus(nc, js)
    directory = _directory()
    executor = Ed25519PrivateKey.generate()
    approvals = Approvals(
        store=RedisApprovalStore(redis_client),
        bus=bus,
        directory=directory,
        key=Ed25519PrivateKey.generate(),
        policy_key=POLICY.public_key(),
        publish=lambda subject, event: js.publish(subject, encode(event), stream=catalog.STREAM),
        clock=lambda: datetime.now(UTC),
        ttl=timedelta(minutes=5),
        reporter=SecurityReporter("approvals"),
        early=EarlyAnswers(bus, directory, POLICY.public_key()),
        executor_key=executor.public_key(),
    )
    reports: list[Any] = []

    async def report(subject: str, event: Any) -> None:
        reports.append(msgspec.structs.replace(event))

    approvals.reporter.attach_publish(report)
    async with no_files_read(nc, executor):
        yield Stack(nc, js, approvals, reports, ns)
    await nc.close()


def _directory() -> Any:
    from effectgate.contracts.directory import PrincipalDirectory

    return PrincipalDirectory.from_toml(
        '[principals.demo-agent]\nautonomy = 1\n[approvers.alice]\nroles = ["operator"]\n'
        '[approvers.carol]\nroles = ["sre"]\n'
    )


async def test_a_request_waiting_for_its_decision_is_read_after_the_policys_floor(stack: Stack) -> None:
    await stack.request("a")
    await stack.request("b", body_id="not a token!")  # known by its Nats-Msg-Id, as policy and audit know it
    await stack.request("c", headers={"Status": "404"})  # a stored header ends nothing
    waiting = await stack.approvals.bus.waiting(10)
    assert waiting.complete
    assert [rid for _, rid in waiting.requests] == [stack.ns + "a", stack.ns + "b", stack.ns + "c"]
    assert {p for p, _ in waiting.requests} == {AGENT}
    fewer = await stack.approvals.bus.waiting(2)
    assert (len(fewer.requests), fewer.complete) == (2, False)


async def test_an_answer_before_the_decision_is_not_open_then_counts_once_opened(stack: Stack) -> None:
    await stack.request("a")
    early = await stack.answer("alice", "a", approve=False)
    assert (early.ok, early.reason_code) == (False, "approval_not_open")
    decision = await stack.decide("a", Verdict.NEEDS_APPROVAL, copy=True)
    again = await stack.answer("alice", "a", approve=False)
    assert (again.ok, again.reason_code) == (False, "approval_not_open")  # decided: the copy waits for this service
    await stack.approvals.on_decision(decision)
    await _ack_all(stack.js, catalog.APPROVALS_CONSUMER.durable)
    counted = await stack.answer("alice", "a", approve=False)
    assert (counted.ok, counted.reason_code) == (True, "rejected")
    assert stack.reports == []


async def test_an_id_whose_request_was_decided_otherwise_is_unknown_and_reported(stack: Stack) -> None:
    await stack.request("a")
    await stack.decide("a", Verdict.EXECUTE, copy=False)
    reply = await stack.answer("alice", "a")
    assert (reply.ok, reply.reason_code) == (False, "unknown_approval")
    never = await stack.answer("alice", "never-sent")
    assert (never.ok, never.reason_code) == (False, "unknown_approval")
    assert [r.reason_code for r in stack.reports] == ["unknown_approval", "unknown_approval"]


async def test_a_voter_without_the_role_is_refused_and_reported_before_it_opens(stack: Stack) -> None:
    await stack.request("a")
    await stack.decide("a", Verdict.NEEDS_APPROVAL, copy=True)
    reply = await stack.answer("carol", "a")
    assert (reply.ok, reply.reason_code) == (False, "not_entitled")
    assert [(r.reason_code, r.actor) for r in stack.reports] == [("not_entitled", "carol")]
