"""The worker's batch mode, watched on a real JetStream stream: one call per fetch, each message settled in order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

from effectgate.contracts.bus.catalog import ConsumerSpec
from effectgate.shared.consumer.consumers import Consumer, Delivery
from effectgate.shared.consumer.worker import DurableWorker, Later, Settle, Settlement

pytestmark = pytest.mark.connected

Batch = Callable[[Sequence[Delivery]], Awaitable[Sequence[Settlement]]]


class Bench:
    """A stream of its own, one consumer, and a batch worker around a handler the test writes."""

    def __init__(self, nc: Client, js: JetStreamContext, ns: str) -> None:
        self.nc, self.js, self.ns, self.stream = nc, js, ns, f"S{ns}"
        self.calls: list[list[tuple[bytes, int]]] = []
        self.workers: list[DurableWorker] = []

    async def start(self, handle: Batch, *, ack_wait_s: float = 30.0, batch_size: int = 64) -> DurableWorker:
        if not self.workers:
            await self.js.add_stream(StreamConfig(name=self.stream, subjects=[f"{self.ns}.>"]))
            config = ConsumerConfig(
                durable_name="c", ack_policy=AckPolicy.EXPLICIT, max_deliver=-1, ack_wait=ack_wait_s
            )
            await self.js.add_consumer(self.stream, config)

        async def recorded(deliveries: Sequence[Delivery]) -> Sequence[Settlement]:
            self.calls.append([(delivery.data, delivery.num_delivered) for delivery in deliveries])
            return await handle(deliveries)

        async def one(delivery: Delivery) -> Settlement:
            raise AssertionError("a batch consumer is never handed a single message")

        spec = ConsumerSpec("c", None, max_deliver=-1, ack_wait_s=ack_wait_s)
        consumer = Consumer(spec, one, max_workers=1, handle_batch=recorded, batch_size=batch_size)
        worker = DurableWorker(self.nc, consumer, 0.2, self.stream)
        await worker.start()
        self.workers.append(worker)
        return worker

    async def send(self, *bodies: bytes) -> None:
        for body in bodies:
            await self.js.publish(f"{self.ns}.m", body, stream=self.stream)

    def handed(self) -> list[bytes]:
        return [data for call in self.calls for data, _ in call]

    async def until(self, predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert time.monotonic() < deadline, f"not reached in {timeout_s}s: {self.calls}"
            await asyncio.sleep(0.05)

    async def settled(self) -> None:
        async def quiet() -> bool:
            info = await self.js.consumer_info(self.stream, "c")
            return info.num_ack_pending == 0 and info.num_pending == 0

        deadline = time.monotonic() + 10.0
        while not await quiet():
            assert time.monotonic() < deadline, f"not settled: {self.calls}"
            await asyncio.sleep(0.05)


@pytest_asyncio.fixture
async def bench(nc: Client, js: JetStreamContext, ns: str) -> AsyncIterator[Bench]:
    made = Bench(nc, js, ns)
    await js.add_stream(StreamConfig(name=made.stream, subjects=[f"{ns}.>"]))
    yield made
    for worker in made.workers:
        await worker.stop(grace_s=1.0)
    await js.delete_stream(made.stream)


def _bodies(count: int) -> list[bytes]:
    return [f"m{index:03}".encode() for index in range(count)]


async def _ack_all(deliveries: Sequence[Delivery]) -> list[Settlement]:
    return [Settle.ACK] * len(deliveries)


async def test_messages_waiting_are_handed_over_together_in_stream_order_and_each_acked(bench: Bench) -> None:
    bodies = _bodies(100)
    await bench.send(*bodies)
    await bench.start(_ack_all, batch_size=64)
    await bench.until(lambda: len(bench.handed()) == 100)
    await bench.settled()
    assert bench.handed() == bodies
    sizes = [len(call) for call in bench.calls]
    assert 1 < max(sizes) <= 64  # handed over together, each batch bounded by batch_size (a fetch may return fewer)


@pytest.mark.parametrize("not_now", [Settle.RETRY, Later(0.3)], ids=["retry", "later"])
async def test_a_failing_message_settles_those_before_it_and_is_retried_in_place_with_those_after(
    bench: Bench, not_now: Settlement
) -> None:
    failed: set[bytes] = set()

    async def third_fails_once(deliveries: Sequence[Delivery]) -> list[Settlement]:
        outcomes: list[Settlement] = []
        for delivery in deliveries:
            first_time = delivery.data == b"m002" and delivery.data not in failed
            failed.update([delivery.data] if first_time else [])
            outcomes.append(not_now if first_time else Settle.ACK)
        return outcomes

    await bench.send(*_bodies(5))
    await bench.start(third_fails_once)
    await bench.until(lambda: len(bench.calls) == 2)
    await bench.settled()
    first, again = bench.calls
    assert [data for data, _ in first] == _bodies(5)
    assert [data for data, _ in again] == [b"m002", b"m003", b"m004"]  # handed again in order, not redelivered
    assert all(delivered == 1 for _, delivered in again)


async def test_an_exception_retries_the_whole_batch_in_place_and_nothing_is_acked_before(bench: Bench) -> None:
    async def fails_once(deliveries: Sequence[Delivery]) -> list[Settlement]:
        if len(bench.calls) == 1:
            raise RuntimeError("the batch's one write failed")
        return [Settle.ACK] * len(deliveries)

    await bench.send(*_bodies(4))
    await bench.start(fails_once)
    await bench.until(lambda: len(bench.calls) == 2)
    await bench.settled()
    assert [data for data, _ in bench.calls[0]] == [data for data, _ in bench.calls[1]] == _bodies(4)


async def test_a_terminated_message_in_a_batch_is_never_handed_again(bench: Bench) -> None:
    async def term_the_second(deliveries: Sequence[Delivery]) -> list[Settlement]:
        return [Settle.TERM if delivery.data == b"m001" else Settle.ACK for delivery in deliveries]

    await bench.send(*_bodies(3))
    await bench.start(term_the_second, ack_wait_s=1.0)
    await bench.settled()
    await asyncio.sleep(1.5)  # past ack_wait: nothing comes back
    assert bench.handed() == _bodies(3)


async def test_a_worker_stopped_mid_retry_hands_the_batch_back_at_once_and_the_next_gets_each_once(
    bench: Bench,
) -> None:
    async def always_retry(deliveries: Sequence[Delivery]) -> list[Settlement]:
        return [Settle.ACK if delivery.data == b"m000" else Settle.RETRY for delivery in deliveries]

    await bench.send(*_bodies(4))
    worker = await bench.start(always_retry)
    await bench.until(lambda: len(bench.calls) >= 2)
    await worker.stop(grace_s=5.0)
    bench.calls.clear()
    await bench.start(_ack_all)
    await bench.until(lambda: len(bench.handed()) == 3)
    await bench.settled()
    # m000 was acked; the rest come back at once (well before ack_wait), each once. The worker naks them
    # in stream order, but the server may redeliver one behind the others: a redelivery that meets an
    # expiring pull request goes to the back of its queue (nats-server consumer.go, loopAndGatherMsgs).
    assert sorted(bench.handed()) == [b"m001", b"m002", b"m003"], bench.calls
    assert all(delivered == 2 for call in bench.calls for _, delivered in call)


def test_a_batch_handler_needs_one_worker() -> None:
    spec = ConsumerSpec("c", None)

    async def one(delivery: Delivery) -> Settlement:
        return Settle.ACK

    with pytest.raises(ValueError, match="max_workers=1"):
        Consumer(spec, one, max_workers=2, handle_batch=_ack_all)
