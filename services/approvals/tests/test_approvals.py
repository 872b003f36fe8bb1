"""The approvals workflow: opening, answering (single use, entitled, not self), expiry; in memory and on Redis."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis.asyncio as aioredis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.approvals.adapters.redis_store import RedisApprovalStore
from effectgate.approvals.domain import ApprovalState, DecideCommand
from effectgate.approvals.errors import ApprovalStoreUnavailable
from effectgate.approvals.handlers import answer_bytes, decision_bytes
from effectgate.approvals.memory import InMemoryApprovalsBus, InMemoryApprovalStore
from effectgate.approvals.ports import ApprovalStore
from effectgate.approvals.rebuild import rebuild_approvals
from effectgate.approvals.service import Approvals
from effectgate.contracts.approval_ids import approval_id_for
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.errors import IndexLost
from effectgate.contracts.events import (
    ApprovalGranted,
    ApprovalRejected,
    ApprovalRequested,
    BoundRequest,
    DecisionMade,
    encode,
)
from effectgate.contracts.integrity.signing import sign_event, verify_event
from effectgate.contracts.rpc.recheck import RecheckAnswer, RecheckQuery
from effectgate.contracts.security import digest
from effectgate.contracts.vocabulary import Verdict
from effectgate.shared.consumer.acks import Settle
from effectgate.shared.runtime.reporting import SecurityReporter

POLICY, APPROVALS = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
APPROVERS = PrincipalDirectory.from_toml(
    """
[principals.demo-agent]
autonomy = 1
operator = "oscar"
[approvers.alice]
roles = ["operator"]
[approvers.bob]
roles = ["operator"]
[approvers.oscar]
roles = ["operator"]
[approvers.demo-agent]
roles = ["operator"]
[approvers.carol]
roles = ["sre"]
"""
)
"""``demo-agent`` is also an approver's name; ``oscar`` operates ``demo-agent``."""


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def _decision(rid: str, verdict: Verdict = Verdict.NEEDS_APPROVAL, pinned: bool = False) -> DecisionMade:
    bound = BoundRequest(
        principal="demo-agent",
        tool="file_system",
        version="1.0.0",
        descriptor_digest="sha256:d",
        operation="write",
        arguments={"path": "a", "content": "x"},
    )
    decision = DecisionMade(
        event_id=f"d-{rid}",
        occurred_at=datetime.now(UTC),
        request_id=rid,
        principal="demo-agent",
        verdict=verdict,
        reason_code="approval_required",
        reason="r",
        request=bound,
        request_hash="sha256:h-" + rid,
        approver_role="operator",
        version_pinned=pinned,
    )
    return sign_event(decision, POLICY)


def _answer(allowed: bool, code: str = "still_allowed", key: Ed25519PrivateKey = POLICY) -> Any:
    def answer(query: RecheckQuery) -> RecheckAnswer:
        reply = RecheckAnswer(
            request_hash=query.request_hash,
            allowed=allowed,
            reason_code=code,
            reason=f"because {code}",
            checked_at=datetime.now(UTC),
        )
        return sign_event(reply, key)

    return answer


def _approvals(
    store: ApprovalStore, clock: Clock, published: list[tuple[str, Any]], bus: InMemoryApprovalsBus | None = None
) -> Approvals:
    async def publish(subject: str, event: Any) -> object:
        published.append((subject, event))
        return None

    bus = bus or InMemoryApprovalsBus(answer=_answer(True))
    return Approvals(
        store=store,
        bus=bus,
        directory=APPROVERS,
        key=APPROVALS,
        policy_key=POLICY.public_key(),
        publish=publish,
        clock=clock,
        ttl=timedelta(seconds=60),
        executor_key=bus.executor.public_key(),
    )


async def test_needs_approval_opens_one_pending_approval(store: ApprovalStore, ns: str) -> None:
    published: list[tuple[str, Any]] = []
    approvals = _approvals(store, Clock(), published)
    assert await approvals.on_decision(_decision(ns))
    assert await approvals.on_decision(_decision(ns))
    assert await approvals.on_decision(_decision(ns + "x", Verdict.EXECUTE))
    pending = [p for p in await store.list_pending() if p.request_id.startswith(ns)]
    assert [p.approval_id for p in pending] == [approval_id_for("demo-agent", ns)]
    assert all(isinstance(event, ApprovalRequested) for _, event in published)
    announced = {(subject, event.approval_id) for subject, event in published}  # a redelivery announces again
    assert announced == {(f"tg.approval.requested.demo-agent.{ns}", approval_id_for("demo-agent", ns))}


@pytest.mark.parametrize("subject", ["another request's", "the decision subject", "junk"])
async def test_a_copy_on_a_subject_not_its_own_opens_nothing(store: ApprovalStore, ns: str, subject: str) -> None:
    approvals, decision = _approvals(store, Clock(), []), _decision(ns)
    on = {
        "another request's": Subjects.needs_approval("demo-agent", ns + "b"),
        "the decision subject": Subjects.decision("demo-agent", ns),
        "junk": "tg.needs_approval.demo-agent",
    }[subject]
    assert await decision_bytes(approvals, encode(decision), on) is Settle.TERM
    assert await store.get(approval_id_for("demo-agent", ns)) is None
    assert await decision_bytes(approvals, encode(decision), Subjects.needs_approval("demo-agent", ns)) is Settle.ACK
    assert await store.get(approval_id_for("demo-agent", ns)) is not None


async def test_forged_decision_opens_nothing(store: ApprovalStore, ns: str) -> None:
    approvals = _approvals(store, Clock(), [])
    assert not await approvals.on_decision(sign_event(_decision(ns), Ed25519PrivateKey.generate()))
    assert await store.get(approval_id_for("demo-agent", ns)) is None


@pytest.mark.parametrize(
    ("approver", "code"),
    [
        ("mallory", "unknown_approver"),
        ("demo-agent", "self_approval"),
        ("oscar", "self_approval"),  # the person who operates demo-agent
        ("carol", "not_entitled"),
        ("a.b", "unknown_approver"),
    ],
)
async def test_refused_answers_change_nothing(store: ApprovalStore, ns: str, approver: str, code: str) -> None:
    approvals = _approvals(store, Clock(), published := [])
    await approvals.on_decision(_decision(ns))
    approval_id = approval_id_for("demo-agent", ns)
    reply = await approvals.answer(approver, DecideCommand(approval_id=approval_id, approve=True))
    assert (reply.ok, reply.reason_code) == (False, code)
    assert (await store.get(approval_id)).state is ApprovalState.PENDING  # type: ignore[union-attr]
    assert not any(isinstance(e, ApprovalGranted) for _, e in published)


async def test_grant_is_signed_and_single_use(store: ApprovalStore, ns: str) -> None:
    approvals = _approvals(store, Clock(), published := [])
    await approvals.on_decision(_decision(ns))
    command = DecideCommand(approval_id=approval_id_for("demo-agent", ns), approve=True)
    first, second = await approvals.answer("alice", command), await approvals.answer("bob", command)
    assert first.ok and (second.ok, second.reason_code) == (False, "not_pending")
    again = await approvals.answer("alice", command)  # a double click: the state as it is, nothing new
    assert (again.ok, again.reason_code, again.state, again.votes) == (
        True,
        "granted",
        ApprovalState.GRANTED,
        ("alice",),
    )
    grants = [e for _, e in published if isinstance(e, ApprovalGranted)]
    assert len(grants) == 1 and verify_event(grants[0], APPROVALS.public_key())
    assert grants[0].request_hash == "sha256:h-" + ns and grants[0].approver == "alice"


async def test_expiry_rejects_once_and_late_answers_are_refused(store: ApprovalStore, ns: str) -> None:
    clock = Clock()
    approvals = _approvals(store, clock, published := [])
    await approvals.on_decision(_decision(ns))
    clock.now += timedelta(seconds=61)
    assert await approvals.expire_due() >= 1
    assert await approvals.expire_due() == 0
    rejected = [e for _, e in published if isinstance(e, ApprovalRejected) and e.request_id == ns]
    assert [e.reason_code for e in rejected] == ["approval_expired"]
    reply = await approvals.answer("alice", DecideCommand(approval_id=approval_id_for("demo-agent", ns), approve=True))
    assert (reply.ok, reply.reason_code) == (False, "expired")


async def test_unknown_approval_is_refused(store: ApprovalStore) -> None:
    reply = await _approvals(store, Clock(), []).answer("alice", DecideCommand(approval_id="ap-nope", approve=True))
    assert (reply.ok, reply.reason_code) == (False, "unknown_approval")


async def test_redis_down_is_reported_not_swallowed() -> None:
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client = aioredis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    with pytest.raises(ApprovalStoreUnavailable):
        await RedisApprovalStore(client).list_pending()
    await client.aclose()


async def test_give_up_ends_the_request_with_a_signed_rejection(store: ApprovalStore, ns: str) -> None:
    approvals = _approvals(store, Clock(), published := [])
    await approvals.give_up(_decision(ns))
    [(subject, event)] = published
    assert subject == f"tg.approval.rejected.demo-agent.{ns}"
    assert isinstance(event, ApprovalRejected) and event.reason_code == "approval_store_unavailable"
    assert verify_event(event, APPROVALS.public_key())


@pytest.mark.parametrize(
    ("code", "reason"),
    [("forbidden", "policy"), ("unknown_principal", "principal"), ("descriptor_superseded", "version")],
)
async def test_a_call_the_policy_no_longer_allows_is_rejected_and_the_approver_told(
    store: ApprovalStore, ns: str, code: str, reason: str
) -> None:
    bus = InMemoryApprovalsBus(answer=_answer(False, code))
    approvals = _approvals(store, Clock(), published := [], bus)
    await approvals.on_decision(_decision(ns))
    approval_id = approval_id_for("demo-agent", ns)
    reply = await approvals.answer("alice", DecideCommand(approval_id=approval_id, approve=True))
    assert (reply.ok, reply.reason_code) == (False, code) and "no longer" in reply.reason
    assert not any(isinstance(e, ApprovalGranted) for _, e in published)
    [rejected] = [e for _, e in published if isinstance(e, ApprovalRejected)]
    assert rejected.reason_code == code and verify_event(rejected, APPROVALS.public_key())
    assert (await store.get(approval_id)).state is ApprovalState.REJECTED  # type: ignore[union-attr]


@pytest.mark.parametrize("answer", [None, _answer(True, key=Ed25519PrivateKey.generate())], ids=["silent", "forged"])
async def test_without_a_valid_recheck_answer_nothing_is_granted(store: ApprovalStore, ns: str, answer: Any) -> None:
    approvals = _approvals(store, Clock(), published := [], InMemoryApprovalsBus(answer=answer))
    await approvals.on_decision(_decision(ns))
    approval_id = approval_id_for("demo-agent", ns)
    reply = await approvals.answer("alice", DecideCommand(approval_id=approval_id, approve=True))
    assert (reply.ok, reply.reason_code) == (False, "policy_unreachable")
    assert (await store.get(approval_id)).state is ApprovalState.PENDING  # type: ignore[union-attr]
    assert not any(isinstance(e, ApprovalGranted | ApprovalRejected) for _, e in published)


async def test_no_approval_is_opened_for_a_request_that_already_ended(store: ApprovalStore, ns: str) -> None:
    approvals = _approvals(store, Clock(), published := [], InMemoryApprovalsBus(receipts={ns}))
    assert await approvals.on_decision(_decision(ns))
    assert await store.get(approval_id_for("demo-agent", ns)) is None and published == []


async def test_a_retried_resolution_wins_again_and_only_with_its_token(store: ApprovalStore, ns: str) -> None:
    approvals = _approvals(store, Clock(), [])
    await approvals.on_decision(_decision(ns))
    approval_id = approval_id_for("demo-agent", ns)
    assert await store.resolve(approval_id, ApprovalState.GRANTED, "t1")
    assert await store.resolve(approval_id, ApprovalState.GRANTED, "t1")
    assert not await store.resolve(approval_id, ApprovalState.GRANTED, "t2")
    assert not await store.resolve(approval_id, ApprovalState.REJECTED, "t1")


async def test_one_failing_expiry_does_not_stop_the_sweep(store: ApprovalStore, ns: str) -> None:
    clock, published = Clock(), []
    approvals = _approvals(store, clock, published)
    for suffix in ("a", "b", "c"):
        await approvals.on_decision(_decision(ns + suffix))
    failing = f"tg.approval.rejected.demo-agent.{ns}a"

    async def flaky(subject: str, event: Any) -> object:
        if subject == failing:
            raise ConnectionError("publish failed")
        published.append((subject, event))
        return None

    approvals.publish = flaky
    clock.now += timedelta(seconds=61)
    await approvals.expire_due()
    expired = {e.request_id for _, e in published if isinstance(e, ApprovalRejected)}
    assert {ns + "b", ns + "c"} <= expired and ns + "a" not in expired


async def _lose_everything(store: ApprovalStore, redis_client: aioredis.Redis) -> None:
    """Forget every approval, the epoch and the rebuild lock, as a Redis restarted empty would."""
    if isinstance(store, InMemoryApprovalStore):
        store.lose_everything()
        return
    keys = [key async for key in redis_client.scan_iter("tg:approval*")]
    await redis_client.delete(*keys, "tg:epoch:approvals", "tg:rebuild:approvals")


async def test_a_lost_store_refuses_until_rebuilt_from_the_stream(
    store: ApprovalStore, redis_client: aioredis.Redis, ns: str
) -> None:
    published: list[tuple[str, Any]] = []
    bus = InMemoryApprovalsBus(answer=_answer(True))
    approvals = _approvals(store, Clock(), published, bus)
    for suffix in ("open", "granted", "ended"):
        await approvals.on_decision(_decision(ns + suffix))
    bus.requests = [e for _, e in published if isinstance(e, ApprovalRequested)]
    bus.outcomes, bus.receipts = {ns + "granted"}, {ns + "ended"}
    await _lose_everything(store, redis_client)
    with pytest.raises(IndexLost):
        await store.list_pending()
    with pytest.raises(IndexLost):
        await store.get(approval_id_for("demo-agent", ns + "open"))
    with pytest.raises(IndexLost):
        await approvals.on_decision(_decision(ns + "new"))
    assert await rebuild_approvals(store, bus, "me", APPROVALS.public_key())
    pending = await store.list_pending()
    assert [p.request_id for p in pending] == [ns + "open"]
    assert pending[0].expires_at == bus.requests[0].expires_at


async def test_a_rebuilt_approval_still_knows_its_request_pinned_the_version(
    store: ApprovalStore, redis_client: aioredis.Redis, ns: str
) -> None:
    queries: list[RecheckQuery] = []

    def answer(query: RecheckQuery) -> RecheckAnswer:
        queries.append(query)
        return _answer(True)(query)  # type: ignore[no-any-return]

    published: list[tuple[str, Any]] = []
    bus = InMemoryApprovalsBus(answer=answer)
    approvals = _approvals(store, Clock(), published, bus)
    await approvals.on_decision(_decision(ns, pinned=True))
    bus.requests = [e for _, e in published if isinstance(e, ApprovalRequested)]
    assert [e.version_pinned for e in bus.requests] == [True]
    await _lose_everything(store, redis_client)
    assert await rebuild_approvals(store, bus, "me", APPROVALS.public_key())
    assert (
        await approvals.answer("alice", DecideCommand(approval_id=approval_id_for("demo-agent", ns), approve=True))
    ).ok
    assert [q.version_pinned for q in queries] == [True]


async def test_a_rebuild_whose_store_is_lost_again_midway_starts_over(
    store: ApprovalStore, redis_client: aioredis.Redis, ns: str
) -> None:
    published: list[tuple[str, Any]] = []
    bus = InMemoryApprovalsBus(answer=_answer(True))
    approvals = _approvals(store, Clock(), published, bus)
    for suffix in ("a", "b"):
        await approvals.on_decision(_decision(ns + suffix))
    requests = [e for _, e in published if isinstance(e, ApprovalRequested)]
    await _lose_everything(store, redis_client)

    class LosingBus(InMemoryApprovalsBus):
        async def requested(self) -> Any:
            yield requests[0]
            await _lose_everything(store, redis_client)  # Redis restarts empty again, mid-rebuild
            yield requests[1]

    rebuilt = await rebuild_approvals(store, LosingBus(), "me", APPROVALS.public_key())
    assert not rebuilt, "a half-rebuilt store was declared complete"
    assert not await store.has_epoch()
    assert await rebuild_approvals(store, InMemoryApprovalsBus(requests=requests), "me", APPROVALS.public_key())
    assert {p.request_id for p in await store.list_pending()} == {ns + "a", ns + "b"}


def _reported(approvals: Approvals) -> list[Any]:
    """Make ``approvals`` record its security reports; return the list they land in."""
    events: list[Any] = []

    async def publish(subject: str, event: Any) -> None:
        events.append((subject, event))

    approvals.reporter = SecurityReporter("approvals")
    approvals.reporter.attach_publish(publish)
    return events


@pytest.mark.parametrize(
    ("approver", "body", "code"),
    [
        ("mallory", None, "unknown_approver"),
        ("a.b", None, "unknown_approver"),
        ("demo-agent", None, "self_approval"),  # the approver named like the requesting principal
        ("oscar", None, "self_approval"),  # the person who operates the requesting principal
        ("carol", None, "not_entitled"),
        ("alice", b'{"approval_id": "ap-000000000000", "approve": true}', "unknown_approval"),
        ("alice", b'{"approval_id": "x", "approve": "yes"}', "malformed"),
        ("alice", b"not json", "malformed"),
        ("alice", b'{"approval_id": "ap-1", "approve": true, "as": "admin"}', "malformed"),
        ("alice", b" " * 5000, "oversized"),
    ],
)
async def test_each_refused_answer_is_reported_once(
    store: ApprovalStore, ns: str, approver: str, body: bytes | None, code: str
) -> None:
    approvals = _approvals(store, Clock(), [])
    reports = _reported(approvals)
    await approvals.on_decision(_decision(ns))
    approval_id = approval_id_for("demo-agent", ns)
    data = body if body is not None else f'{{"approval_id": "{approval_id}", "approve": true}}'.encode()
    reply = await answer_bytes(approvals, approver, data)
    await approvals.reporter.flush()
    assert (reply.ok, reply.reason_code) == (False, code)
    [(subject, event)] = reports
    assert subject == "tg.security.approvals.approval_refused" and event.reason_code == code
    assert event.actor == (approver if approver != "a.b" else digest("a.b"))
    assert event.subject.startswith("tg.approvals.decide.")
    if body is None:
        assert (event.approval_id, event.principal, event.request_id) == (approval_id, "demo-agent", ns)
    elif code in ("malformed", "oversized"):
        assert (event.payload_sha256, event.principal) == (digest(body), None)
    else:
        assert (event.approval_id, event.principal, event.payload_sha256) == ("ap-000000000000", None, None)


@pytest.mark.parametrize("late", ["answered", "expired", "expired_swept"])
async def test_late_answers_are_refused_and_reported(store: ApprovalStore, ns: str, late: str) -> None:
    clock = Clock()
    approvals = _approvals(store, clock, [])
    await approvals.on_decision(_decision(ns))
    command = DecideCommand(approval_id=approval_id_for("demo-agent", ns), approve=True)
    if late == "answered":
        assert (await approvals.answer("bob", command)).ok
    else:
        clock.now += timedelta(seconds=61)
        if late == "expired_swept":
            await approvals.expire_due()
    reports = _reported(approvals)
    reply = await approvals.answer("alice", command)
    await approvals.reporter.flush()
    code = "not_pending" if late == "answered" else "expired"
    assert (reply.ok, reply.reason_code) == (False, code)
    assert [(e.kind, e.reason_code, e.request_id) for _, e in reports] == [("approval_refused", code, ns)]


async def test_granting_and_a_call_the_policy_no_longer_allows_report_nothing(store: ApprovalStore, ns: str) -> None:
    bus = InMemoryApprovalsBus(answer=_answer(False, "forbidden"))
    approvals = _approvals(store, Clock(), [], bus)
    reports = _reported(approvals)
    await approvals.on_decision(_decision(ns))
    await approvals.on_decision(_decision(ns + "b"))
    no_longer = await approvals.answer(
        "alice", DecideCommand(approval_id=approval_id_for("demo-agent", ns), approve=True)
    )
    assert (no_longer.ok, no_longer.reason_code) == (False, "forbidden")
    rejected = DecideCommand(approval_id=approval_id_for("demo-agent", ns + "b"), approve=False)
    assert (await approvals.answer("alice", rejected)).ok
    await approvals.reporter.flush()
    assert reports == []


async def test_an_approval_never_asks_the_policy_to_admit_the_call(store: ApprovalStore, ns: str) -> None:
    """The rate is taken when the granted call runs (the executor's re-check), not when it is approved."""
    queries: list[RecheckQuery] = []

    def answer(query: RecheckQuery) -> RecheckAnswer:
        queries.append(query)
        return _answer(True)(query)  # type: ignore[no-any-return]

    published: list[tuple[str, Any]] = []
    approvals = _approvals(store, Clock(), published, InMemoryApprovalsBus(answer=answer))
    await approvals.on_decision(_decision(ns))
    command = DecideCommand(approval_id=approval_id_for("demo-agent", ns), approve=True)
    assert (await approvals.answer("alice", command)).ok
    assert [q.admit_request_id for q in queries] == [None]


@pytest.mark.parametrize("verdict", [Verdict.EXECUTE, Verdict.DENY, Verdict.REFUSE])
async def test_a_decision_that_needs_no_approval_is_passed_over_without_its_signature_checked(
    store: ApprovalStore, ns: str, verdict: Verdict, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[object] = []
    monkeypatch.setattr("effectgate.approvals.service.opening.verify_event", lambda *args: checked.append(args) or True)
    approvals = _approvals(store, Clock(), [])
    assert await approvals.on_decision(_decision(ns, verdict))
    assert checked == [] and await store.get(approval_id_for("demo-agent", ns)) is None
