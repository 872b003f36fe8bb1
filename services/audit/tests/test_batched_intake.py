"""The audit's consumer in batches, on a real JetStream stream: one append per batch, nothing twice, order kept."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig

from effectgate.audit.adapters.sqlite import SqliteAuditStore
from effectgate.audit.adapters.stream_reads import next_reader
from effectgate.audit.domain import AuditEntry, AuditRecord
from effectgate.audit.handlers import consumers
from effectgate.audit.ports import Writer
from effectgate.audit.service import Audit
from effectgate.contracts.bus.catalog import STREAM, ConsumerSpec, Subjects
from effectgate.contracts.events import DecisionMade, encode
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.security import SecurityKind
from effectgate.contracts.vocabulary import Verdict
from effectgate.shared.consumer.worker import DurableWorker
from effectgate.shared.runtime.assembly import RuntimeCell
from effectgate.shared.runtime.reporting import SecurityReporter

pytestmark = pytest.mark.connected

POLICY = Ed25519PrivateKey.generate()


class CrashingStore(SqliteAuditStore):
    """Appends a batch, then hangs where the process is killed: before any message is acknowledged."""

    appended: asyncio.Event
    sizes: list[int]

    async def append_batch(
        self, entries: Sequence[AuditEntry], writer: Writer | None = None
    ) -> list[AuditRecord | None]:
        records = await super().append_batch(entries, writer)
        self.sizes.append(len(entries))
        self.appended.set()
        await asyncio.Event().wait()
        return records


class StoppedStore(SqliteAuditStore):
    """Hangs before its first append, where the process is killed: the batch is neither stored nor acknowledged."""

    reached: asyncio.Event

    async def append_batch(
        self, entries: Sequence[AuditEntry], writer: Writer | None = None
    ) -> list[AuditRecord | None]:
        self.reached.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class Intake:
    """A durable consumer of one principal's decisions on the effectgate stream, and audit workers on one chain."""

    def __init__(self, nc: Client, js: JetStreamContext, ns: str, path: Path) -> None:
        self.nc, self.js, self.ns, self.path = nc, js, ns, path
        self.spec = ConsumerSpec(f"audit-{ns}", f"tg.decision.{ns}.*", max_deliver=-1, ack_wait_s=1.0)
        self.reported: list[tuple[str, Any]] = []
        self.stores: list[SqliteAuditStore] = []

    async def provision(self) -> None:
        config = ConsumerConfig(
            durable_name=self.spec.durable,
            filter_subject=self.spec.filter_subject,
            ack_policy=AckPolicy.EXPLICIT,
            max_deliver=-1,
            ack_wait=self.spec.ack_wait_s,
        )
        await self.js.add_consumer(STREAM, config)

    async def worker(self, store: SqliteAuditStore) -> tuple[DurableWorker, Audit]:
        async def publish(subject: str, event: Any) -> None:
            self.reported.append((subject, event))

        async def last_seq() -> int | None:
            return None

        reporter = SecurityReporter("audit")
        reporter.attach_publish(publish)
        audit, cell = (
            Audit(
                store,
                last_seq,
                keys={"policy": POLICY.public_key()},
                reporter=reporter,
                read_next=next_reader(self.js, self.spec.filter_subject),
            ),
            RuntimeCell[Audit](),
        )
        cell.set(audit)
        self.stores.append(store)
        [consumer] = consumers(cell)
        worker = DurableWorker(self.nc, dataclasses.replace(consumer, spec=self.spec), 0.2, STREAM)
        await worker.start()
        return worker, audit

    async def send(self, *rids: str, forged: Sequence[str] = ()) -> None:
        for rid in rids:
            decision = DecisionMade(
                event_id=f"d-{rid}",
                occurred_at=datetime.now(UTC),
                request_id=rid,
                principal=self.ns,
                verdict=Verdict.DENY,
                reason_code="no_permit",
                reason="r",
            )
            body = encode(decision if rid in forged else sign_event(decision, POLICY))
            await self.js.publish(Subjects.decision(self.ns, rid), body)

    async def settled(self) -> None:
        await until(lambda: self._quiet(), "the consumer has handled everything")

    async def _quiet(self) -> bool:
        info = await self.js.consumer_info(STREAM, self.spec.durable)
        return info.num_pending == 0 and info.num_ack_pending == 0


async def until(check: Callable[[], Any], what: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, f"not reached in {timeout_s}s: {what}"
        await asyncio.sleep(0.05)


@pytest_asyncio.fixture
async def intake(nc: Client, js: JetStreamContext, ns: str, tmp_path: Path) -> AsyncIterator[Intake]:
    made = Intake(nc, js, ns, tmp_path / "audit.db")
    await made.provision()
    yield made
    await js.delete_consumer(STREAM, made.spec.durable)
    for store in made.stores:
        await store.close()


async def _chain_holds(audit: Audit, count: int) -> list[AuditRecord]:
    """The chain verifies, holds ``count`` records, each stream message once, in stream order."""
    records = await audit.store.page(0, 1000)
    assert (await audit.store.verify()).ok
    assert await audit.store.out_of_order() == []
    assert (await audit.store.coverage())[0] == []
    stream_seqs = [record.stream_seq for record in records]
    assert len(records) == count and stream_seqs == sorted(set(stream_seqs))
    return records


async def test_a_batch_redelivered_after_a_crash_before_its_acks_appends_nothing_twice(intake: Intake) -> None:
    rids = [f"r{index:02}" for index in range(10)]
    await intake.send(*rids)
    crashing = CrashingStore(intake.path)
    crashing.appended, crashing.sizes = asyncio.Event(), []
    first, _ = await intake.worker(crashing)
    await asyncio.wait_for(crashing.appended.wait(), 10.0)
    assert first._loop is not None
    first._loop.cancel()  # killed after the batch's transaction, before any acknowledgement
    await asyncio.gather(first._loop, return_exceptions=True)
    assert (
        len(crashing.sizes) == 1
    )  # one batch of the waiting events (a fetch may hand over fewer than ten), one transaction
    await intake.send("r10", "r11", "r12")

    _, audit = await intake.worker(SqliteAuditStore(intake.path))
    await intake.settled()
    records = await _chain_holds(audit, 13)
    assert [record.request_id for record in records] == [*rids, "r10", "r11", "r12"]


async def test_a_forged_event_in_the_middle_of_a_batch_is_recorded_and_reported_and_the_rest_are_not(
    intake: Intake,
) -> None:
    await intake.send("r1", "r2", "r3", forged=["r2"])
    _, audit = await intake.worker(SqliteAuditStore(intake.path))
    await intake.settled()
    records = await _chain_holds(audit, 3)
    assert [record.request_id for record in records] == ["r1", "r2", "r3"]

    async def reported() -> bool:
        return bool(intake.reported)

    await until(reported, "the forgery is reported")
    [(subject, event)] = intake.reported
    assert event.kind == SecurityKind.DECISION_FORGED and event.request_id == "r2", event
    assert subject.startswith("tg.security.audit.")


async def test_a_batch_lost_before_its_append_keeps_its_place_in_the_chain(intake: Intake) -> None:
    intake.spec = dataclasses.replace(intake.spec, ack_wait_s=4.0)  # the lost batch comes back after 4 s
    await intake.js.delete_consumer(STREAM, intake.spec.durable)
    await intake.provision()
    await intake.send("r00")
    first, _ = await intake.worker(SqliteAuditStore(intake.path))
    await intake.settled()  # the chain holds r00: its last stream sequence is known
    await first.stop(grace_s=1.0)
    stopped = StoppedStore(intake.path)
    stopped.reached = asyncio.Event()
    second, _ = await intake.worker(stopped)
    await intake.send(*(f"r{index:02}" for index in range(1, 6)))
    await asyncio.wait_for(stopped.reached.wait(), 10.0)
    assert second._loop is not None
    second._loop.cancel()  # killed before the batch was stored: r01..r05 come back only after ack_wait
    await asyncio.gather(second._loop, return_exceptions=True)
    await intake.send("r06", "r07")  # delivered at once to the next worker

    _, audit = await intake.worker(SqliteAuditStore(intake.path))
    await until(lambda: _holds(audit, 8), "every event is in the chain")
    records = await _chain_holds(audit, 8)
    assert [record.request_id for record in records] == [f"r{index:02}" for index in range(8)]
    await intake.settled()  # r01..r05 delivered again append nothing
    assert await audit.store.count() == 8


async def _holds(audit: Audit, count: int) -> bool:
    return await audit.store.count() >= count
