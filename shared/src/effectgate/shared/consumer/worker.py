"""The broker edge shared by all services: durable pull consumers with explicit settlement."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from functools import partial

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.nats_permissions import JS_API
from effectgate.shared.consumer.acks import Later, Settle, Settlement
from effectgate.shared.consumer.batching import Answer, answers, handle_batch, message_scope
from effectgate.shared.consumer.consumers import Consumer, Delivery
from effectgate.shared.consumer.fairness import fair_loop
from effectgate.shared.consumer.pulling import HAND_BACK_S, Puller
from effectgate.shared.stores.binding import bound

# Consumer and Delivery are declared in consumers.py; importable from here too, as they were.
__all__ = ["DurableWorker", "Later", "Settle", "Settlement", "message_scope"]

log = logging.getLogger("effectgate")

RETRY_DELAY_S = 2.0
"""Delay before a transient fault is first retried, seconds (doubled at each further delivery)."""

MAX_RETRY_DELAY_S = 30.0
"""Longest delay between two retries of a transient fault, seconds."""

INACTIVE_POLL_S = 0.2
"""How often a consumer that is not active (``Consumer.active``) asks again, seconds."""

ABORT_GRACE_S = 5.0
"""After ``abort``, how long handlers get to publish what they ended, seconds."""


class DurableWorker:
    """Fetches from one durable pull consumer and settles every message explicitly.

    Args:
        nc: the connection.
        consumer: what to run.
        retry_delay_s: nak delay of a transient fault, seconds.
        stream: the stream the durable consumer belongs to.
        fair_window: a consumer with ``fair_by`` fetches up to this many messages ahead and
            starts them principal by principal (:mod:`effectgate.shared.consumer.fairness`);
            0: stream order.
        api_prefix: the JetStream API prefix the connection's user calls (``$JS.API``, or the
            name its account imports the API under: :func:`~effectgate.contracts.bus.nats_accounts.js_api_of`).
    """

    def __init__(
        self,
        nc: Client,
        consumer: Consumer,
        retry_delay_s: float = RETRY_DELAY_S,
        stream: str = catalog.STREAM,
        fair_window: int = 0,
        api_prefix: str = JS_API,
    ) -> None:
        self._nc, self._consumer, self._retry_delay_s, self._stream = nc, consumer, retry_delay_s, stream
        self._api_prefix = api_prefix
        self._fair_window = fair_window if consumer.fair_by is not None else 0
        self._inflight: set[asyncio.Task[None]] = set()
        self._running = False
        self._loop: asyncio.Task[None] | None = None
        self._max_deliver, self._ack_wait_s = consumer.spec.max_deliver, consumer.spec.ack_wait_s

    async def start(self) -> None:
        """Bind to the durable consumer and start fetching.

        A consumer not provisioned yet is waited for (:func:`~effectgate.shared.stores.binding.bound`).
        """
        spec = self._consumer.spec
        js = self._nc.jetstream(prefix=self._api_prefix)
        info = await bound(f"consumer {spec.durable}", partial(js.consumer_info, self._stream, spec.durable))
        self._max_deliver = info.config.max_deliver or -1
        self._ack_wait_s = info.config.ack_wait or spec.ack_wait_s
        puller = Puller(self._nc, self._stream, spec.durable, self._api_prefix)
        await puller.start()
        self._running = True
        self._loop = asyncio.create_task(self._fetch_loop(puller), name=f"consume-{spec.durable}")

    async def stop(self, grace_s: float = 10.0, abort: Callable[[], None] | None = None) -> None:
        """Stop fetching; give in-flight handlers ``grace_s`` seconds, then ``abort``, then cancel."""
        self._running = False
        if self._loop is not None:
            await asyncio.gather(self._loop, return_exceptions=True)
        if self._inflight:
            await asyncio.wait(set(self._inflight), timeout=grace_s)
        if self._inflight and abort is not None:
            abort()
            await asyncio.wait(set(self._inflight), timeout=ABORT_GRACE_S)
        for task in set(self._inflight):
            task.cancel()
        await asyncio.gather(*self._inflight, return_exceptions=True)

    async def _fetch_loop(self, puller: Puller) -> None:
        try:
            if self._consumer.fair_by is not None and self._fair_window > 0:
                await fair_loop(self, puller, self._consumer.fair_by, self._fair_window)
            else:
                await self._in_order_loop(puller)
        finally:
            await puller.stop()

    async def _in_order_loop(self, puller: Puller) -> None:
        while self._running:
            if not self._consuming():
                await puller.hand_back()
                await asyncio.sleep(INACTIVE_POLL_S)
                continue
            free = self._consumer.max_workers - len(self._inflight)
            if free <= 0:
                await asyncio.wait(set(self._inflight), return_when=asyncio.FIRST_COMPLETED)
                continue
            if self._consumer.handle_batch is not None:
                await self._dispatch_batch(await self._fetch(puller, self._consumer.batch_size))
                continue
            for msg in await self._fetch(puller, free):
                await (self._dispatch(msg) if self._running else self._hand_back(msg))

    def _consuming(self) -> bool:
        """Running, and active (``Consumer.active``) when the consumer says when it is."""
        return self._running and (self._consumer.active is None or self._consumer.active())

    async def _fetch(self, puller: Puller, batch: int, max_bytes: int = 0) -> list[Msg]:
        try:
            return await puller.fetch(batch, wait_s=1.0, max_bytes=max_bytes)
        except nats.errors.Error as error:  # reconnecting, draining: the consumer keeps every message
            log.warning("%s: fetch failed (%s); retrying", self._consumer.spec.durable, type(error).__name__)
            await asyncio.sleep(0.5)
            return []

    async def _hand_back(self, msg: Msg) -> None:
        """Fetched while stopping: give it back at once, for another worker or the next start."""
        with contextlib.suppress(nats.errors.Error):
            await msg.nak(delay=HAND_BACK_S)

    async def _dispatch_batch(self, msgs: list[Msg]) -> None:
        if not self._consuming():
            for msg in msgs:
                await self._hand_back(msg)
        elif msgs:
            await handle_batch(self, msgs)
            if len(msgs) < self._consumer.batch_size:
                await asyncio.sleep(self._consumer.batch_linger_s)

    async def _dispatch(self, msg: Msg) -> None:
        if self._consumer.max_workers == 1:
            await self._process(msg)  # one worker: stream order
            return
        self._start(msg)

    def _start(self, msg: Msg) -> asyncio.Task[None]:
        """Handle ``msg`` in a task of its own (one of ``max_workers``); that task."""
        task = asyncio.create_task(self._process(msg))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)
        return task

    async def _process(self, msg: Msg) -> None:
        with message_scope(self._consumer.spec.durable, msg.subject, msg.headers):
            await self._processed(msg)

    async def _processed(self, msg: Msg) -> None:
        delivery = self._delivery(msg)
        keepalive = asyncio.create_task(self._keepalive([msg]))
        try:
            outcome = await self._handled(delivery)
            if self._consumer.max_workers == 1:
                outcome = await self._retried_in_place(delivery, outcome)
        finally:
            keepalive.cancel()
        if outcome not in (Settle.ACK, Settle.TERM) and delivery.last:
            outcome = await self._given_up(delivery)
        await self._settle(msg, outcome)

    async def _retried_in_place(self, delivery: Delivery, outcome: Settlement) -> Settlement:
        """One worker keeps stream order: a message that fails or asks for later is retried here, and the next waits.

        (A nak would let the following messages overtake it.) A :class:`Later` waits its own
        delay. Stops retrying when the worker stops.
        """
        attempt = 1
        while (outcome is Settle.RETRY or isinstance(outcome, Later)) and self._running:
            await asyncio.sleep(self._in_place_delay_s(outcome, attempt))
            outcome, attempt = await self._handled(delivery), attempt + 1
        return outcome

    def _in_place_delay_s(self, outcome: Settlement, attempt: int) -> float:
        """Before retrying in place: a Later's own delay, else ``retry_delay_s`` doubled per attempt, seconds."""
        if isinstance(outcome, Later):
            return outcome.delay_s
        return float(min(self._retry_delay_s * 2 ** min(attempt - 1, 16), MAX_RETRY_DELAY_S))

    async def _handled(self, delivery: Delivery) -> Settlement:
        return (await self._guarded(lambda: self._consumer.handle(delivery), delivery, 1))[0]

    async def _guarded(self, handle: Callable[[], Awaitable[Answer]], head: Delivery, count: int) -> list[Settlement]:
        """What ``handle`` answered for ``count`` messages from ``head`` on; all RETRY when it failed (module doc)."""
        durable, limit = self._consumer.spec.durable, asyncio.timeout(self._consumer.handler_timeout_s)
        try:
            async with limit:
                return answers(await handle(), count)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the worker is stopping this handler
            log.error("%s: a handler leaked a cancellation on seq %s; retrying", durable, head.stream_seq)
        except Exception as error:
            self._log_fault(head, error, limit.expired())
        return [Settle.RETRY] * count

    def _log_fault(self, delivery: Delivery, error: Exception, timed_out: bool) -> None:
        durable, seq = self._consumer.spec.durable, delivery.stream_seq
        if timed_out and isinstance(error, TimeoutError):
            log.error(
                "%s: handler still running after %ss on seq %s; retrying",
                durable,
                self._consumer.handler_timeout_s,
                seq,
            )
        else:
            log.error("%s: handler failed on seq %s; retrying", durable, seq, exc_info=error)

    async def _given_up(self, delivery: Delivery) -> Settlement:
        durable, give_up = self._consumer.spec.durable, self._consumer.give_up
        if give_up is None:
            return Settle.RETRY
        try:
            await give_up(delivery)
        except Exception:
            log.critical(
                "%s: seq %s could not be ended; left to the backstop", durable, delivery.stream_seq, exc_info=True
            )
            return Settle.TERM
        log.error("%s: gave up on seq %s after %s deliveries", durable, delivery.stream_seq, delivery.num_delivered)
        return Settle.ACK

    async def _settle(self, msg: Msg, outcome: Settlement) -> None:
        try:
            if outcome is Settle.ACK:
                await msg.ack()
            elif outcome is Settle.TERM:
                await msg.term()
            else:
                await msg.nak(delay=outcome.delay_s if isinstance(outcome, Later) else self._backoff_s(msg))
        except nats.errors.Error as error:  # the message comes back after ack_wait: handlers are idempotent
            log.warning("%s: could not settle (%s)", self._consumer.spec.durable, type(error).__name__)

    def _backoff_s(self, msg: Msg) -> float:
        """``retry_delay_s`` doubled per delivery, at most :data:`MAX_RETRY_DELAY_S`, seconds.

        A fault that lasts is retried less and less often: a consumer that never gives up never spins.
        """
        delivered = msg.metadata.num_delivered or 1
        return float(min(self._retry_delay_s * 2 ** min(delivered - 1, 16), MAX_RETRY_DELAY_S))

    async def _keepalive(self, held: Sequence[Msg]) -> None:
        """``+WPI`` each third of ``ack_wait`` for every message in ``held`` (which may shrink meanwhile)."""
        interval = max(self._ack_wait_s / 3, 1.0)
        with contextlib.suppress(nats.errors.Error):
            while True:
                await asyncio.sleep(interval)
                for msg in list(held):
                    await msg.in_progress()

    def _delivery(self, msg: Msg) -> Delivery:
        meta = msg.metadata
        delivered = meta.num_delivered or 1
        return Delivery(
            subject=msg.subject,
            data=msg.data or b"",
            headers=dict(msg.headers or {}),
            stream_seq=meta.sequence.stream,
            num_delivered=delivered,
            stored_at=meta.timestamp or datetime.now(UTC),
            last=0 < self._max_deliver <= delivered,
        )
