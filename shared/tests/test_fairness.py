"""Fair mode of the consumer worker, watched on a real JetStream stream: principals served in turn.

Messages are published on ``<ns>.<principal>``; the lane of a message is its last token.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

from effectgate.contracts.bus.catalog import ConsumerSpec
from effectgate.shared.consumer import fairness
from effectgate.shared.consumer.consumers import Consumer, Delivery
from effectgate.shared.consumer.fairness import Lanes
from effectgate.shared.consumer.worker import DurableWorker, Settle, Settlement

pytestmark = [pytest.mark.connected, pytest.mark.timing]


def _lane(subject: str) -> str | None:
    return subject.rsplit(".", 1)[-1]


class Fair:
    """A stream of its own, one durable consumer, and fair workers around a handler that takes ``work_s``."""

    def __init__(self, nc: Client, js: JetStreamContext, ns: str) -> None:
        self.nc, self.js, self.ns, self.stream = nc, js, ns, f"F{ns}"
        self.handled: list[tuple[str, bytes, int]] = []
        self.workers: list[DurableWorker] = []

    async def provision(self, ack_wait_s: float = 30.0) -> None:
        await self.js.add_stream(StreamConfig(name=self.stream, subjects=[f"{self.ns}.*"]))
        config = ConsumerConfig(
            durable_name="c", ack_policy=AckPolicy.EXPLICIT, ack_wait=ack_wait_s, max_ack_pending=10_000
        )
        await self.js.add_consumer(self.stream, config)

    async def start(
        self, work_s: float, max_workers: int = 4, window: int = 1000, quiet_s: float | None = None
    ) -> DurableWorker:
        async def handle(delivery: Delivery) -> Settlement:
            await asyncio.sleep(quiet_s if quiet_s is not None and delivery.subject.endswith(".quiet") else work_s)
            self.handled.append((_lane(delivery.subject) or "", delivery.data, delivery.num_delivered))
            return Settle.ACK

        spec = ConsumerSpec("c", None, max_deliver=5)
        worker = DurableWorker(
            self.nc, Consumer(spec, handle, max_workers=max_workers, fair_by=_lane), 0.2, self.stream, window
        )
        await worker.start()
        self.workers.append(worker)
        return worker

    async def send(self, principal: str, count: int, pad_bytes: int = 0) -> None:
        subject, pad = f"{self.ns}.{principal}", b"." * pad_bytes
        bodies = [b"%s-%d%s" % (principal.encode(), n, pad) for n in range(count)]
        await asyncio.gather(*(self.js.publish(subject, body) for body in bodies))

    async def until_handled(self, count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.handled) < count:
            assert time.monotonic() < deadline, f"{len(self.handled)} of {count} handled in {timeout_s}s"
            await asyncio.sleep(0.05)

    def places(self, principal: str) -> list[int]:
        """Where ``principal``'s messages came in the order of handling (0 first)."""
        return [index for index, (lane, _, _) in enumerate(self.handled) if lane == principal]


@pytest_asyncio.fixture
async def fair(nc: Client, js: JetStreamContext, ns: str) -> AsyncIterator[Fair]:
    made = Fair(nc, js, ns)
    yield made
    for worker in made.workers:
        await worker.stop(grace_s=1.0)
    await js.delete_stream(made.stream)


async def test_a_backlog_of_one_principal_does_not_delay_another(fair: Fair) -> None:
    await fair.provision()
    await fair.send("flood", 600)
    await fair.send("quiet", 5)
    await fair.start(work_s=0.01)
    await fair.until_handled(605, timeout_s=60.0)
    assert max(fair.places("quiet")) < 40, fair.places("quiet")  # in stream order they would come last
    assert sorted(data for _, data, _ in fair.handled) == sorted(
        [b"flood-%d" % n for n in range(600)] + [b"quiet-%d" % n for n in range(5)]
    )


async def test_one_principal_never_takes_every_slot(fair: Fair) -> None:
    await fair.provision()
    await fair.send("flood", 20)
    await fair.start(work_s=2.0, quiet_s=0.0)  # 4 slots; the flood may hold 3
    await asyncio.sleep(0.3)
    await fair.send("quiet", 1)
    await fair.until_handled(1, timeout_s=30.0)
    assert fair.handled[0][0] == "quiet"  # it did not wait for a flood handler to end


async def test_what_waits_is_bounded_in_bytes(fair: Fair, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fairness, "WINDOW_BYTES", 300_000)
    await fair.provision()
    await fair.send("flood", 40, pad_bytes=100_000)
    await fair.start(work_s=3.0, max_workers=2)
    await asyncio.sleep(1.5)
    held = (await fair.js.consumer_info(fair.stream, "c")).num_ack_pending
    # one fetch may pass the bound by the server's max_payload (1 MiB) and its headroom
    assert held <= (300_000 + fair.nc.max_payload + fairness.HEADROOM_BYTES) // 100_000 + 1, held


async def test_messages_waiting_their_turn_are_kept_alive_not_delivered_again(fair: Fair) -> None:
    await fair.provision(ack_wait_s=2.0)
    await fair.send("flood", 40)
    await fair.start(work_s=0.25, max_workers=2)  # the last waits about 5 s, over twice the ack wait
    await fair.until_handled(40, timeout_s=60.0)
    await asyncio.sleep(2.5)  # a message that was not kept alive would be handled again by now
    assert len(fair.handled) == 40
    assert {delivered for _, _, delivered in fair.handled} == {1}


async def test_two_workers_sharing_a_consumer_handle_each_message_once(fair: Fair) -> None:
    await fair.provision()
    await fair.send("flood", 400)
    await fair.send("quiet", 5)
    await fair.start(work_s=0.01)
    await fair.start(work_s=0.01)
    await fair.until_handled(405, timeout_s=60.0)
    await asyncio.sleep(0.5)
    assert collections.Counter(data for _, data, _ in fair.handled).most_common(1)[0][1] == 1
    assert len(fair.handled) == 405
    assert max(fair.places("quiet")) < 40, fair.places("quiet")


async def test_a_stopping_worker_hands_back_what_waits_for_the_next(fair: Fair) -> None:
    await fair.provision()
    await fair.send("flood", 200)
    first = await fair.start(work_s=0.05)
    await fair.until_handled(20, timeout_s=30.0)
    await first.stop(grace_s=5.0)
    fair.workers.remove(first)
    await fair.start(work_s=0.0)
    await fair.until_handled(200, timeout_s=30.0)
    await asyncio.sleep(0.5)
    assert len(fair.handled) == 200
    assert sorted(data for _, data, _ in fair.handled) == sorted(b"flood-%d" % n for n in range(200))


def _msg(subject: str) -> Any:
    return Msg(None, subject=subject)  # type: ignore[arg-type]


def _taken(lanes: Lanes) -> str | None:
    msg = lanes.take()
    return None if msg is None else msg.subject


def test_lanes_take_one_message_of_each_principal_in_turn() -> None:
    lanes = Lanes(_lane, cap=10)
    for subject in ("s.a", "s.a", "s.a", "s.b", "s.c", "s.b"):
        lanes.put(_msg(subject))
    taken = [_taken(lanes) for _ in range(len(lanes))]
    assert taken == ["s.a", "s.b", "s.c", "s.a", "s.b", "s.a"]
    assert len(lanes) == 0


def test_a_lane_at_its_cap_of_running_messages_is_passed_over() -> None:
    lanes = Lanes(_lane, cap=1)
    first, *_ = held = [_msg("s.a"), _msg("s.a"), _msg("s.b")]
    for msg in held:
        lanes.put(msg)
    assert [_taken(lanes), _taken(lanes), _taken(lanes)] == ["s.a", "s.b", None]
    lanes.finished(first)
    assert _taken(lanes) == "s.a"


def test_fair_mode_needs_several_workers() -> None:
    async def handle(delivery: Delivery) -> Settlement:
        return Settle.ACK

    with pytest.raises(ValueError, match="fair_by needs several workers"):
        Consumer(ConsumerSpec("c", None), handle, max_workers=1, fair_by=_lane)
