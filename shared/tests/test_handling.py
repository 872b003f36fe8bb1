"""The settlement rules every service's consumer follows, watched on a real JetStream stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

from effectgate.contracts.bus.catalog import ConsumerSpec
from effectgate.shared.consumer.consumers import Consumer, Delivery
from effectgate.shared.consumer.worker import DurableWorker, Later, Settle, Settlement

pytestmark = pytest.mark.connected


class Bench:
    """A stream of its own, one consumer, and a worker around a handler the test writes."""

    def __init__(self, nc: Client, js: JetStreamContext, ns: str) -> None:
        self.nc, self.js, self.ns, self.stream = nc, js, ns, f"S{ns}"
        self.seen: list[tuple[bytes, int]] = []
        self.given_up: list[bytes] = []
        self.workers: list[DurableWorker] = []

    async def start(
        self,
        handle: Callable[[Delivery], Awaitable[Settlement]],
        *,
        max_deliver: int = 5,
        ack_wait_s: float = 30.0,
        give_up: Callable[[Delivery], Awaitable[None]] | None = None,
        max_workers: int = 4,
        handler_timeout_s: float | None = None,
    ) -> DurableWorker:
        await self.js.add_stream(StreamConfig(name=self.stream, subjects=[f"{self.ns}.>"]))
        config = ConsumerConfig(
            durable_name="c", ack_policy=AckPolicy.EXPLICIT, max_deliver=max_deliver, ack_wait=ack_wait_s
        )
        await self.js.add_consumer(self.stream, config)

        async def recorded(delivery: Delivery) -> Settlement:
            self.seen.append((delivery.data, delivery.num_delivered))
            return await handle(delivery)

        async def giving_up(delivery: Delivery) -> None:
            self.given_up.append(delivery.data)
            if give_up is not None:
                await give_up(delivery)

        spec = ConsumerSpec("c", None, max_deliver=max_deliver, ack_wait_s=ack_wait_s)
        consumer = Consumer(spec, recorded, giving_up, max_workers, handler_timeout_s)
        worker = DurableWorker(self.nc, consumer, 0.2, self.stream)
        await worker.start()
        self.workers.append(worker)
        return worker

    async def send(self, *bodies: bytes) -> None:
        for body in bodies:
            await self.js.publish(f"{self.ns}.m", body, stream=self.stream)

    def deliveries(self, body: bytes) -> list[int]:
        return [n for data, n in self.seen if data == body]

    async def until(self, predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert time.monotonic() < deadline, f"not reached in {timeout_s}s: {self.seen}"
            await asyncio.sleep(0.05)

    async def quiet(self) -> dict[str, Any]:
        info = await self.js.consumer_info(self.stream, "c")
        return {"ack_pending": info.num_ack_pending, "pending": info.num_pending}


@pytest_asyncio.fixture
async def bench(nc: Client, js: JetStreamContext, ns: str) -> AsyncIterator[Bench]:
    made = Bench(nc, js, ns)
    yield made
    for worker in made.workers:
        await worker.stop(grace_s=1.0)
    await js.delete_stream(made.stream)


def _by_body(rules: dict[bytes, Callable[[Delivery], Awaitable[Settlement]]]) -> Any:
    async def handle(delivery: Delivery) -> Settlement:
        return await rules[delivery.data](delivery)

    return handle


async def _ack(delivery: Delivery) -> Settlement:
    return Settle.ACK


async def _term(delivery: Delivery) -> Settlement:
    return Settle.TERM


async def _retry_once(delivery: Delivery) -> Settlement:
    return Settle.RETRY if delivery.num_delivered == 1 else Settle.ACK


async def _raise_once(delivery: Delivery) -> Settlement:
    if delivery.num_delivered == 1:
        raise RuntimeError("a handler bug")
    return Settle.ACK


async def _leak_cancel_once(delivery: Delivery) -> Settlement:
    if delivery.num_delivered == 1:
        raise asyncio.CancelledError()
    return Settle.ACK


async def _later_once(delivery: Delivery) -> Settlement:
    return Later(1.0) if delivery.num_delivered == 1 else Settle.ACK


async def test_each_answer_is_settled_as_its_rule_says(bench: Bench) -> None:
    rules = {b"ack": _ack, b"term": _term, b"retry": _retry_once, b"raise": _raise_once, b"cancel": _leak_cancel_once}
    await bench.start(_by_body(rules))
    started = time.monotonic()
    await bench.send(*rules)
    await bench.until(
        lambda: all(len(bench.deliveries(body)) >= (1 if body in (b"ack", b"term") else 2) for body in rules)
    )
    await asyncio.sleep(1.0)
    assert bench.deliveries(b"ack") == [1] and bench.deliveries(b"term") == [1], "acked or terminated came back"
    for body in (b"retry", b"raise", b"cancel"):
        assert bench.deliveries(body) == [1, 2], f"{body!r} was not redelivered exactly once"
    assert time.monotonic() - started < 8
    assert await bench.quiet() == {"ack_pending": 0, "pending": 0}
    assert bench.given_up == []


async def test_later_is_redelivered_after_its_delay_not_before(bench: Bench) -> None:
    await bench.start(_by_body({b"later": _later_once}))
    await bench.send(b"later")
    await bench.until(lambda: len(bench.deliveries(b"later")) == 1)
    first = time.monotonic()
    await bench.until(lambda: len(bench.deliveries(b"later")) == 2)
    assert time.monotonic() - first >= 0.8


async def test_a_leaked_cancellation_does_not_end_the_consumer(bench: Bench) -> None:
    leaked: list[bytes] = []

    async def leak(delivery: Delivery) -> Settlement:
        if delivery.data.startswith(b"leak") and delivery.data not in leaked:
            leaked.append(delivery.data)
            raise asyncio.CancelledError()
        return Settle.ACK

    await bench.start(leak, max_deliver=2, max_workers=1)
    await bench.send(b"leak-1", b"leak-2", b"after")
    await bench.until(lambda: bench.deliveries(b"after") == [1])


@pytest.mark.parametrize(("answer", "gives_up"), [(Settle.RETRY, True), ("raise", True), (Later(0.1), True)])
async def test_the_last_delivery_gives_up_instead_of_dropping(bench: Bench, answer: Any, gives_up: bool) -> None:
    async def fail(delivery: Delivery) -> Settlement:
        if answer == "raise":
            raise RuntimeError("always")
        return answer  # type: ignore[no-any-return]

    await bench.start(fail, max_deliver=3)
    await bench.send(b"doomed")
    await bench.until(lambda: bench.given_up == [b"doomed"])
    await asyncio.sleep(1.0)
    assert bench.deliveries(b"doomed") == [1, 2, 3]
    assert await bench.quiet() == {"ack_pending": 0, "pending": 0}, "the given-up message was not acked"


async def test_a_give_up_that_fails_terminates_and_never_loops(bench: Bench) -> None:
    async def broken(delivery: Delivery) -> None:
        raise RuntimeError("the give-up could not publish")

    async def fail(delivery: Delivery) -> Settlement:
        return Settle.RETRY

    await bench.start(fail, max_deliver=2, give_up=broken)
    await bench.send(b"doomed")
    await bench.until(lambda: bench.given_up == [b"doomed"])
    await asyncio.sleep(1.0)
    assert bench.deliveries(b"doomed") == [1, 2] and bench.given_up == [b"doomed"]
    assert await bench.quiet() == {"ack_pending": 0, "pending": 0}


async def test_a_handler_longer_than_ack_wait_is_not_redelivered(bench: Bench) -> None:
    async def slow(delivery: Delivery) -> Settlement:
        await asyncio.sleep(4.5)
        return Settle.ACK

    await bench.start(slow, ack_wait_s=1.5)
    await bench.send(b"slow")
    await bench.until(lambda: bench.deliveries(b"slow") == [1])
    await asyncio.sleep(6.0)
    assert bench.deliveries(b"slow") == [1], "a running handler's message was redelivered"


async def test_a_handler_past_its_timeout_is_cancelled_and_retried(bench: Bench) -> None:
    async def stuck_once(delivery: Delivery) -> Settlement:
        if delivery.num_delivered == 1:
            await asyncio.Event().wait()  # never ends by itself
        return Settle.ACK

    await bench.start(stuck_once, handler_timeout_s=0.5)
    await bench.send(b"stuck")
    await bench.until(lambda: bench.deliveries(b"stuck") == [1, 2], timeout_s=5.0)  # not after ack_wait (30 s)


async def test_stop_drains_then_aborts_then_cancels(bench: Bench) -> None:
    finished, aborted = asyncio.Event(), asyncio.Event()

    async def handle(delivery: Delivery) -> Settlement:
        if delivery.data == b"quick":
            await asyncio.sleep(0.3)
            finished.set()
            return Settle.ACK
        await aborted.wait()  # ends only when the service aborts it
        return Settle.ACK

    worker = await bench.start(handle)
    await bench.send(b"quick", b"stuck")
    await bench.until(lambda: len(bench.seen) == 2)
    await worker.stop(grace_s=1.0, abort=aborted.set)
    assert finished.is_set() and aborted.is_set()
    for _ in range(20):  # acks are published asynchronously
        if await bench.quiet() == {"ack_pending": 0, "pending": 0}:
            break
        await asyncio.sleep(0.1)
    assert await bench.quiet() == {"ack_pending": 0, "pending": 0}, "a drained or aborted handler was not acked"


@pytest.mark.parametrize("status", ["404", "408", "409", "503", "100"])
async def test_a_message_carrying_its_own_status_header_is_delivered_like_any_other(bench: Bench, status: str) -> None:
    await bench.start(_by_body({b"plain": _ack, b"headed": _ack}))
    await bench.js.publish(f"{bench.ns}.m", b"headed", stream=bench.stream, headers={"Status": status})
    await bench.send(b"plain")
    await bench.until(lambda: bench.deliveries(b"headed") == [1] and bench.deliveries(b"plain") == [1])
    for _ in range(20):
        if await bench.quiet() == {"ack_pending": 0, "pending": 0}:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("a message with a Status header was not acknowledged")


@pytest.mark.parametrize("not_now", [Settle.RETRY, Later(0.2)], ids=["retry", "later"])
async def test_one_worker_keeps_stream_order_when_a_message_fails(bench: Bench, not_now: Settlement) -> None:
    order: list[bytes] = []

    async def flaky_first(delivery: Delivery) -> Settlement:
        if delivery.data == b"first" and order.count(b"first?") < 2:
            order.append(b"first?")
            return not_now
        order.append(delivery.data)
        return Settle.ACK

    await bench.start(flaky_first, max_workers=1)
    await bench.send(b"first", b"second", b"third")
    await bench.until(lambda: b"third" in order)
    assert [body for body in order if not body.endswith(b"?")] == [b"first", b"second", b"third"]
