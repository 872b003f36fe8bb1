"""Fixtures of the approvals tests: the store under test (in memory and on a real Redis) and a kit to drive it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.approvals.adapters.redis_store import RedisApprovalStore
from effectgate.approvals.domain import DecideCommand
from effectgate.approvals.memory import InMemoryApprovalsBus, InMemoryApprovalStore
from effectgate.approvals.ports import ApprovalStore
from effectgate.approvals.service import Approvals
from effectgate.contracts.approval_ids import approval_id_for
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import BoundRequest, DecisionMade
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.rpc.recheck import RecheckAnswer, RecheckQuery
from effectgate.contracts.vocabulary import Verdict
from effectgate.shared.runtime.reporting import SecurityReporter

DIRECTORY = PrincipalDirectory.from_toml(
    """
[principals.demo-agent]
autonomy = 1
operator = "oscar"
[approvers.alice]
roles = ["operator"]
[approvers.bob]
roles = ["operator"]
[approvers.dave]
roles = ["operator"]
[approvers.oscar]
roles = ["operator"]
[approvers.demo-agent]
roles = ["operator"]
[approvers.carol]
roles = ["sre"]
"""
)
"""``demo-agent`` is operated by ``oscar``; ``demo-agent`` is also an approver's name."""


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest, redis_client: aioredis.Redis) -> ApprovalStore:
    """The store under test: the in-memory twin, and the Redis store on a real Redis."""
    if request.param == "memory":
        return InMemoryApprovalStore()
    await redis_client.delete("tg:approvals:pending")
    await redis_client.set("tg:epoch:approvals", "test")
    return RedisApprovalStore(redis_client)


class Clock:
    """A settable UTC clock."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Kit:
    """Drives one :class:`Approvals` over ``store``: signed decisions in, published events and reports out."""

    store: ApprovalStore
    ns: str
    policy: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    clock: Clock = field(default_factory=Clock)
    published: list[tuple[str, Any]] = field(default_factory=list)
    reports: list[Any] = field(default_factory=list)
    queries: list[RecheckQuery] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.bus = InMemoryApprovalsBus(answer=self._allowed, clock=self.clock)
        self.approvals = Approvals(
            store=self.store,
            bus=self.bus,
            directory=DIRECTORY,
            key=self.key,
            policy_key=self.policy.public_key(),
            publish=self._publish,
            clock=self.clock,
            ttl=timedelta(seconds=60),
            executor_key=self.bus.executor.public_key(),
            reporter=SecurityReporter("approvals"),
        )
        self.approvals.reporter.attach_publish(self._report)

    def decision(self, rid: str, *, key: str = "k1", content: str = "x", quorum: int = 1) -> DecisionMade:
        """A signed ``needs_approval`` decision of ``demo-agent`` for request ``ns + rid``."""
        bound = BoundRequest(
            principal="demo-agent",
            tool="file_system",
            version="1.0.0",
            descriptor_digest="sha256:d",
            operation="write",
            arguments={"path": self.ns, "content": content},
        )
        decision = DecisionMade(
            event_id=f"d-{self.ns}{rid}",
            occurred_at=self.clock(),
            request_id=self.ns + rid,
            principal="demo-agent",
            verdict=Verdict.NEEDS_APPROVAL,
            reason_code="approval_required",
            reason="r",
            idempotency_key=self.ns + key,
            request=bound,
            request_hash=f"sha256:{self.ns}-{content}",
            approver_role="operator",
            approvals_required=quorum,
        )
        return sign_event(decision, self.policy)

    def approval_id(self, rid: str) -> str:
        """The approval id request ``ns + rid`` opens."""
        return approval_id_for("demo-agent", self.ns + rid)

    async def answer(self, approver: str, rid: str, approve: bool = True, withdraw: bool = False) -> Any:
        """Answer the approval ``rid`` opened; the reply."""
        command = DecideCommand(approval_id=self.approval_id(rid), approve=approve, withdraw=withdraw)
        reply = await self.approvals.answer(approver, command)
        await self.approvals.reporter.flush()
        return reply

    def events(self, kind: type[Any]) -> list[Any]:
        """Published events of type ``kind``, in order."""
        return [event for _, event in self.published if isinstance(event, kind)]

    def _allowed(self, query: RecheckQuery) -> RecheckAnswer:
        self.queries.append(query)
        answer = RecheckAnswer(
            request_hash=query.request_hash,
            allowed=True,
            reason_code="still_allowed",
            reason="still allowed",
            checked_at=datetime.now(UTC),
        )
        return sign_event(answer, self.policy)

    async def _publish(self, subject: str, event: Any) -> object:
        self.published.append((subject, event))
        return None

    async def _report(self, subject: str, event: Any) -> None:
        self.reports.append(msgspec.structs.replace(event))


@pytest.fixture
def kit(store: ApprovalStore, ns: str) -> Kit:
    """A :class:`Kit` on the store under test."""
    return Kit(store, ns)
