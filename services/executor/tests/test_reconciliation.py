"""On a real NATS stream and a real Redis index, an ``uncertain`` write is reconciled through its reconcile operation.

The executor runs the write (its tool host loses it: ``uncertain``); the reconciler, a durable consumer of
the receipts, asks the reconcile operation of a tool host double and publishes the executor-signed
resolution; an operator resolves by a signed command; a replay under the same key carries the resolution.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import ConsumerSpec, Subjects
from effectgate.contracts.events import BoundRequest, DecisionMade, ReceiptIssued, UncertainResolved, request_hash
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.rpc.uncertain import ResolveCommand, UncertainCall
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor, descriptor_digest
from effectgate.contracts.tools.hosting import CallContext
from effectgate.contracts.vocabulary import Outcome, RiskTier, SideEffectClass, Verdict
from effectgate.executor.adapters.contents import ContentReader
from effectgate.executor.adapters.redis_idempotency import RedisIdempotencyStore
from effectgate.executor.adapters.stream import StreamBus
from effectgate.executor.effects.claims import DurableClaims
from effectgate.executor.effects.permission import Permission
from effectgate.executor.effects.running import Runner
from effectgate.executor.effects.timing import Timing
from effectgate.executor.effects.unsealing import Unsealer
from effectgate.executor.errors import ToolFailed, ToolOutcomeUnknown
from effectgate.executor.receipts.outlet import ScrubbingBus
from effectgate.executor.reconciling.operator import UncertainDesk
from effectgate.executor.reconciling.reconciler import Backoff, Reconciler
from effectgate.executor.service import Executor
from effectgate.executor.verification import Keys
from effectgate.shared.consumer.consumers import Consumer, Delivery
from effectgate.shared.consumer.worker import DurableWorker, Settle
from effectgate.shared.secrets.detectors import find_secrets
from effectgate.shared.secrets.redaction import Redactor
from effectgate.shared.stores.idempotency import EPOCH_KEY
from effectgate.shared.stores.stream import next_message

pytestmark = pytest.mark.connected

POLICY, APPROVALS, RECEIPTS, OPERATOR = (Ed25519PrivateKey.generate() for _ in range(4))
ANY: dict[str, Any] = {}
PAY = {"account": "acct-7", "amount": 12}


def _op(side_effect: SideEffectClass, reconcile: str | None = None) -> OperationSpec:
    return OperationSpec(
        input_schema=ANY, output_schema=ANY, side_effect_class=side_effect, risk_tier=RiskTier.LOW, reconcile=reconcile
    )


LEDGER = ToolDescriptor(
    name="ledger",
    version="1.0.0",
    adapter="python:ledger",
    operations={
        "pay": _op(SideEffectClass.FINANCIAL, reconcile="was_paid"),
        "was_paid": _op(SideEffectClass.READ_ONLY),
        "note": _op(SideEffectClass.FINANCIAL),  # a write without a reconcile operation
    },
    timeout_s=2.0,
)


@dataclass
class LedgerHost:
    """A tool host double: every write is lost (``uncertain``); the reconcile operation answers ``answers`` in turn."""

    answers: list[Any] = field(default_factory=list)
    asked: list[tuple[str, dict[str, Any], CallContext | None]] = field(default_factory=list)
    together: asyncio.Barrier | None = None
    """When set, reconcile calls answer only once this many are being asked at once."""

    async def call(
        self,
        descriptor: ToolDescriptor,
        operation: str,
        arguments: dict[str, Any],
        guard: Any = None,
        *,
        context: CallContext | None = None,
    ) -> Any:
        if descriptor.operations[operation].side_effect_class is not SideEffectClass.READ_ONLY:
            raise ToolOutcomeUnknown("worker_lost", "the worker died during the call")
        self.asked.append((operation, arguments, context))
        if self.together is not None:
            await self.together.wait()
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


class _Descriptors:
    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        return LEDGER if (tool, version) == (LEDGER.name, LEDGER.version) else None

    async def list(self) -> list[ToolDescriptor]:
        return [LEDGER]


@dataclass
class Stack:
    nc: Client
    js: JetStreamContext
    principal: str
    host: LedgerHost
    bus: ScrubbingBus
    executor: Executor
    reconciler: Reconciler
    desk: UncertainDesk
    workers: list[DurableWorker] = field(default_factory=list)

    def decision(self, rid: str, operation: str = "pay", key: str = "k1") -> DecisionMade:
        bound = BoundRequest(
            principal=self.principal,
            tool=LEDGER.name,
            version=LEDGER.version,
            descriptor_digest=descriptor_digest(LEDGER),
            operation=operation,
            arguments=PAY,
        )
        decision = DecisionMade(
            event_id=f"decision:{rid}",
            occurred_at=datetime.now(UTC),
            request_id=rid,
            principal=self.principal,
            verdict=Verdict.EXECUTE,
            reason_code="permitted",
            reason="ok",
            idempotency_key=key,
            request=bound,
            request_hash=request_hash(bound),
            side_effect_class=LEDGER.operations[operation].side_effect_class,
            timeout_s=LEDGER.timeout_s,
        )
        return sign_event(decision, POLICY)

    async def published(self, rid: str, operation: str = "pay", key: str = "k1") -> DecisionMade:
        """Publish the decision (the reconciler reads the call's arguments from it)."""
        decision = self.decision(rid, operation, key)
        headers = {"Nats-Expected-Last-Subject-Sequence": "0"}
        await self.js.publish(Subjects.decision(self.principal, rid), msgspec.json.encode(decision), headers=headers)
        return decision

    async def run(self, rid: str, operation: str = "pay", key: str = "k1") -> ReceiptIssued:
        """Publish the decision and let the executor run it: its receipt."""
        decision = await self.published(rid, operation, key)
        await self.executor.on_decision(decision)
        found = await self.bus.receipt(self.principal, rid)
        assert found is not None
        return found

    async def reconciling(self) -> None:
        """Start the reconciler on a durable consumer of this principal's receipts."""
        spec = ConsumerSpec(f"reconciler-{self.principal}", Subjects.receipts_of(self.principal), max_deliver=-1)
        config = ConsumerConfig(
            durable_name=spec.durable, filter_subject=spec.filter_subject, ack_policy=AckPolicy.EXPLICIT, max_deliver=-1
        )
        await self.js.add_consumer(catalog.STREAM, config)
        consumer = Consumer(spec, self.reconciler.handle, give_up=None, max_workers=4)
        worker = DurableWorker(self.nc, consumer, 0.2)
        await worker.start()
        self.workers.append(worker)

    async def resolved(self, rid: str, count: int = 1, within_s: float = 10.0) -> tuple[UncertainResolved, ...]:
        """The request's resolutions once there are ``count`` of them."""
        for _ in range(int(within_s / 0.05)):
            found = await self.bus.resolutions(self.principal, rid)
            if len(found) >= count:
                return found
            await asyncio.sleep(0.05)
        return await self.bus.resolutions(self.principal, rid)

    async def messages_on(self, rid: str) -> list[int]:
        """The stream sequences of every message on the request's resolution subject."""
        seqs, seq = [], 1
        while (message := await next_message(self.js, Subjects.resolution(self.principal, rid), seq)) is not None:
            seqs.append(message.seq)
            seq = message.seq + 1
        return seqs


@pytest_asyncio.fixture
async def stack(nc: Client, js: JetStreamContext, redis_client: aioredis.Redis, ns: str) -> AsyncIterator[Stack]:
    await redis_client.set(EPOCH_KEY, "test")
    bus = ScrubbingBus(StreamBus(nc, js, RECEIPTS), Redactor(find_secrets, []))
    store, timing, host = RedisIdempotencyStore(redis_client), Timing(), LedgerHost()

    def clock() -> datetime:
        return datetime.now(UTC)

    executor = Executor(
        store=store,
        bus=bus,
        descriptors=_Descriptors(),
        runner=Runner(host, bus, clock, contents=ContentReader({})),
        permission=Permission(bus, POLICY.public_key(), clock, timing),
        claims=DurableClaims(bus, store, clock, "exec-1", timing.idempotency_ttl_s),
        keys=Keys(policy=POLICY.public_key(), approvals=APPROVALS.public_key()),
        clock=clock,
        instance="exec-1",
        timing=timing,
    )
    backoff = Backoff(first_s=0.05, max_s=0.1, attempts=3)
    reconciler = Reconciler(host, bus, _Descriptors(), RECEIPTS.public_key(), clock, Unsealer(None), backoff)
    desk = UncertainDesk(bus, OPERATOR.public_key(), clock)
    built = Stack(nc, js, f"agent-{ns}", host, bus, executor, reconciler, desk)
    yield built
    for worker in built.workers:
        await worker.stop()


async def test_the_reconciler_resolves_ran_from_the_reconcile_operation_with_the_call_s_arguments(stack: Stack) -> None:
    stack.host.answers = [{"resolution": "ran", "effect_id": "pay_991", "note": "found in the ledger"}]
    assert (await stack.run("r1")).outcome is Outcome.UNCERTAIN
    await stack.reconciling()
    [resolved] = await stack.resolved("r1")
    assert (resolved.resolution, resolved.resolved_by, resolved.effect_id) == ("ran", "reconciler", "pay_991")
    assert (resolved.attempts, resolved.note, resolved.operation) == (1, "found in the ledger", "pay")
    [(operation, arguments, context)] = stack.host.asked
    assert (operation, arguments) == ("was_paid", PAY)
    assert context is not None and (context.principal, context.request_id) == (stack.principal, "r1")


async def test_a_failing_or_unknowing_reconcile_call_is_an_attempt_and_not_run_ends_it(stack: Stack) -> None:
    stack.host.answers = [
        ToolFailed("tool_error", "the ledger is down"),
        {"resolution": "unknown"},
        {"resolution": "not_run"},
    ]
    await stack.run("r1")
    await stack.reconciling()
    [resolved] = await stack.resolved("r1")
    assert (resolved.resolution, resolved.attempts, len(stack.host.asked)) == ("not_run", 3, 3)


async def test_attempts_exhausted_end_unknown_left_to_the_operator(stack: Stack) -> None:
    stack.host.answers = [{"not": "a reconcile answer"}]
    await stack.run("r1")
    await stack.reconciling()
    [resolved] = await stack.resolved("r1")
    assert (resolved.resolution, resolved.attempts, len(stack.host.asked)) == ("unknown", 3, 3)
    assert "left to the operator" in resolved.note and "not a reconcile answer" in resolved.note
    await asyncio.sleep(0.5)
    assert len(stack.host.asked) == 3 and len(await stack.bus.resolutions(stack.principal, "r1")) == 1


async def test_only_uncertain_receipts_of_operations_declaring_reconcile_are_reconciled(stack: Stack) -> None:
    stack.host.answers = [{"resolution": "ran"}]
    await stack.run("r-note", "note", key="k-note")  # uncertain, but no reconcile operation
    failed = msgspec.structs.replace(
        await stack.run("r-pay", key="k-pay"), event_id="receipt:other", request_id="r-failed", outcome=Outcome.FAILED
    )
    await stack.published("r-failed", key="k-failed")
    await stack.bus.publish_receipt(failed)  # a write of a reconciling operation that did not end uncertain
    await stack.run("r-last", key="k-last")
    await stack.reconciling()
    await stack.resolved("r-last")
    await stack.resolved("r-pay")
    assert await stack.bus.resolutions(stack.principal, "r-note") == ()
    assert await stack.bus.resolutions(stack.principal, "r-failed") == ()
    assert sorted(c.request_id for _, _, c in stack.host.asked if c) == ["r-last", "r-pay"]


async def test_a_redelivered_receipt_publishes_no_second_resolution(stack: Stack) -> None:
    stack.host.answers, stack.host.together = [{"resolution": "unknown"}], asyncio.Barrier(2)
    receipt = await stack.run("r1")
    delivery = Delivery(
        Subjects.receipt(stack.principal, "r1"), msgspec.json.encode(receipt), {}, 1, 3, datetime.now(UTC)
    )
    racing = await asyncio.gather(stack.reconciler.handle(delivery), stack.reconciler.handle(delivery))
    assert racing == [Settle.ACK, Settle.ACK]  # both ran past the check: Nats-Msg-Id keeps one
    assert await stack.reconciler.handle(delivery) is Settle.ACK  # redelivered after the ack was lost
    assert len(await stack.resolved("r1")) == 1 and len(await stack.messages_on("r1")) == 1
    assert len(stack.host.asked) == 2, "the redelivery found the resolution and asked nothing"


def _command(stack: Stack, rid: str, resolution: str, key: Ed25519PrivateKey | None = OPERATOR) -> bytes:
    command = ResolveCommand(request_id=rid, principal=stack.principal, resolution=resolution, note="checked the bank")  # type: ignore[arg-type]
    return msgspec.json.encode(sign_event(command, key) if key else command)


async def test_an_operator_resolves_by_a_signed_command_and_the_list_shows_both(stack: Stack) -> None:
    stack.host.answers = [{"resolution": "unknown"}]
    await stack.run("r-op", key="k-op")
    await stack.run("r-rec", key="k-rec")
    await stack.reconciling()
    await stack.resolved("r-op")
    await stack.resolved("r-rec")
    unsigned = await stack.desk.resolve(_command(stack, "r-op", "ran", None))
    forged = await stack.desk.resolve(_command(stack, "r-op", "ran", Ed25519PrivateKey.generate()))
    assert (unsigned.reason_code, forged.reason_code) == ("not_operator", "not_operator")
    answer = await stack.desk.resolve(_command(stack, "r-op", "ran"))
    assert answer.ok and answer.reason_code == "resolved"
    again = await stack.desk.resolve(_command(stack, "r-op", "not_run"))
    assert (again.ok, again.reason_code) == (False, "already_resolved")
    [unknown, by_operator] = await stack.resolved("r-op", 2)
    assert (unknown.resolution, by_operator.resolution, by_operator.resolved_by) == ("unknown", "ran", "operator")
    assert by_operator.operator_signature and by_operator.note == "checked the bank"
    listed = {c.request_id: c for c in await _listed(stack)}
    assert (listed["r-op"].resolution, listed["r-op"].resolved_by) == ("ran", "operator")
    assert (listed["r-rec"].resolution, listed["r-rec"].resolved_by) == ("unknown", "reconciler")
    assert (listed["r-op"].tool, listed["r-op"].operation) == ("ledger", "pay")


async def test_resolving_a_call_that_is_not_uncertain_is_refused(stack: Stack) -> None:
    uncertain = await stack.run("r1")
    succeeded = msgspec.structs.replace(uncertain, event_id="receipt:ok", request_id="r-ok", outcome=Outcome.SUCCEEDED)
    await stack.bus.publish_receipt(succeeded)
    for rid in ("r-ok", "r-none"):
        answer = await stack.desk.resolve(_command(stack, rid, "not_run"))
        assert (answer.ok, answer.reason_code) == (False, "not_uncertain"), rid
    assert await stack.bus.resolutions(stack.principal, "r-ok") == ()


async def test_a_replay_of_an_uncertain_call_carries_its_resolution(stack: Stack) -> None:
    stack.host.answers = [{"resolution": "unknown"}]
    await stack.run("r1")
    unresolved = await stack.run("r2")
    assert (unresolved.outcome, unresolved.replay_outcome, unresolved.resolution) == ("replayed", "uncertain", None)
    await stack.reconciling()
    [unknown] = await stack.resolved("r1")
    assert (await stack.desk.resolve(_command(stack, "r1", "not_run"))).ok
    [_, settled] = await stack.resolved("r1", 2)
    replay = await stack.run("r3")
    assert (replay.outcome, replay.replay_outcome, replay.replay_of) == ("replayed", "uncertain", "r1")
    assert (replay.resolution, replay.resolution_id) == ("not_run", settled.event_id)
    assert settled.event_id != unknown.event_id
    assert len(stack.host.asked) == 3, "the write ran once; only the reconcile operation was asked"


async def _listed(stack: Stack) -> list[UncertainCall]:
    calls: list[UncertainCall] = []
    after: str | None = None
    for _ in range(1000):
        query: dict[str, Any] = {"limit": 1000} | ({"after": after} if after else {})
        page = await stack.desk.list_page(msgspec.json.encode(query), 1_048_576)
        assert page.ok, page.reason
        calls += [msgspec.json.decode(raw, type=UncertainCall) for raw in page.calls]
        if (after := page.next) is None:
            return [c for c in calls if c.principal == stack.principal]
    raise AssertionError("the listing did not end")


async def test_a_reconcile_answer_too_large_for_the_bus_still_resolves_the_call(stack: Stack) -> None:
    """The note and effect id come from the tool: bounded before they go into the resolution."""
    stack.host.answers = [{"resolution": "ran", "effect_id": "e" * 100_000, "note": "found " * 400_000}]
    await stack.run("r1")
    await stack.reconciling()
    [resolved] = await stack.resolved("r1")
    assert (resolved.resolution, resolved.effect_id) == ("ran", None) and 0 < len(resolved.note) <= 2_000


async def test_an_unknowing_reconcile_answer_too_large_for_the_bus_still_leaves_the_call_to_the_operator(
    stack: Stack,
) -> None:
    stack.host.answers = [{"resolution": "unknown", "note": "maybe " * 400_000}]
    await stack.run("r1")
    await stack.reconciling()
    [resolved] = await stack.resolved("r1")
    assert resolved.resolution == "unknown" and "left to the operator" in resolved.note and len(resolved.note) < 2_000
