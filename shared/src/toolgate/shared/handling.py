"""The broker edge shared by all services: durable pull consumers with explicit settlement.

Every stream message a service consumes goes through one :class:`DurableWorker`, which
fixes the rules once for every handler (nats-py pull consumer, ``ack_policy=explicit``;
JetStream consumer semantics: docs.nats.io "Consumers", "Acknowledgement Models"):

- the handler answers :class:`Settle.ACK` (handled, a refusal included), :class:`Settle.TERM`
  (undecodable or forged: never again), :class:`Settle.RETRY` (transient fault: nak with
  ``retry_delay_s``, doubled at each delivery up to 30 s) or :class:`Later` (not a fault:
  nak with its delay);
- an exception escaping the handler is a transient fault (RETRY), and so is a
  ``CancelledError`` raised inside it while the worker itself is not cancelling it —
  a leaked cancellation never ends the consumer — and so is a handler still running
  after the consumer's ``handler_timeout_s`` (it is cancelled);
- on the consumer's last delivery a RETRY or a :class:`Later` does not let the message
  drop (JetStream delivers a message at most ``max_deliver`` times): the consumer's
  ``give_up`` ends the request instead (a decision, a rejection or a receipt) and the
  message is acked; if even that fails the message is terminated and left to the
  executor's backstop, which ends every request that outlived its deadlines;
- a consumer with one worker keeps stream order: a message that fails (or answers
  :class:`Later`) is retried in place (with the same back-off, or the Later's delay) and
  the next message waits for it (the audit chain, the chat-ops cards);
- while a handler runs longer than a third of ``ack_wait`` the worker sends
  ``+WPI`` (in progress), so a long tool call is not redelivered to another worker;
- messages are pulled with :class:`~toolgate.shared.pulling.Puller`, which knows a stored
  message by its acknowledgement subject, never by a header its publisher chose;
- each message is handled in a :func:`~toolgate.shared.request_log.request_scope`: what its
  handler notes is one log line, with the consumer and the time spent;
- a consumer with one worker may instead take the messages one fetch returned as a batch
  (``handle_batch``, :mod:`toolgate.shared.batching`): one handler call for them all, then
  each settled with its own answer, in order, by the rules above;
- :meth:`DurableWorker.stop` stops fetching, lets in-flight handlers finish within a
  grace period, then calls the service's ``abort`` (which ends what still runs) and only
  then cancels; unacknowledged messages come back after ``ack_wait``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from toolgate.contracts import catalog
from toolgate.shared.batching import Answer, answers, handle_batch, message_scope
from toolgate.shared.pulling import HAND_BACK_S, Puller
from toolgate.shared.settle import Later, Settle, Settlement

__all__ = ["Consumer", "Delivery", "DurableWorker", "HandleBatch", "Later", "Settle", "Settlement", "message_scope"]

log = logging.getLogger("toolgate")

RETRY_DELAY_S = 2.0
"""Delay before a transient fault is first retried, seconds (doubled at each further delivery)."""

MAX_RETRY_DELAY_S = 30.0
"""Longest delay between two retries of a transient fault, seconds."""

ABORT_GRACE_S = 5.0
"""After ``abort``, how long handlers get to publish what they ended, seconds."""


@dataclass(frozen=True)
class Delivery:
    """One delivered stream message, in plain terms.

    Attributes:
        subject: the message subject.
        data: the raw body.
        headers: NATS headers (``{}`` when none).
        stream_seq: the message's stream sequence.
        num_delivered: delivery attempt, 1 for the first.
        stored_at: when the stream stored the message, UTC.
        last: this is the consumer's last delivery attempt.
    """

    subject: str
    data: bytes
    headers: dict[str, str]
    stream_seq: int
    num_delivered: int
    stored_at: datetime
    last: bool = False


Handle = Callable[[Delivery], Awaitable[Settlement]]
GiveUp = Callable[[Delivery], Awaitable[None]]
HandleBatch = Callable[[Sequence[Delivery]], Awaitable[Sequence[Settlement]]]
"""Decides a batch: one answer per delivery, in the same order."""

BATCH_SIZE = 64
"""Most messages one fetch hands a batch handler."""


@dataclass(frozen=True)
class Consumer:
    """A handler bound to one durable consumer of :data:`catalog.STREAM`.

    Attributes:
        spec: the durable consumer (catalog).
        handle: decides each message.
        give_up: ends the message's request when its last delivery still fails; ``None``
            for a consumer that never gives up (``max_deliver = -1``).
        max_workers: handlers running at once; 1 keeps stream order.
        handler_timeout_s: a handler still running after this long is cancelled and its
            message retried (``None``: no bound; the handler bounds its own work).
        handle_batch: decides the messages of one fetch at once, instead of ``handle``
            (:mod:`toolgate.shared.batching`); only with ``max_workers=1``.
        batch_size: most messages one batch holds.
        batch_linger_s: after a batch smaller than ``batch_size``, how long to let messages
            gather before the next fetch, seconds (fewer, larger batches; each waits at most this more).

    Raises:
        ValueError: ``handle_batch`` with more than one worker, or ``batch_size < 1``.
    """

    spec: catalog.ConsumerSpec
    handle: Handle
    give_up: GiveUp | None = None
    max_workers: int = 8
    handler_timeout_s: float | None = None
    handle_batch: HandleBatch | None = None
    batch_size: int = BATCH_SIZE
    batch_linger_s: float = 0.0

    def __post_init__(self) -> None:
        if self.handle_batch is not None and (self.max_workers != 1 or self.batch_size < 1):
            raise ValueError(f"{self.spec.durable}: a batch handler needs max_workers=1 and batch_size >= 1")


class DurableWorker:
    """Fetches from one durable pull consumer and settles every message explicitly.

    Args:
        nc: the connection.
        consumer: what to run.
        retry_delay_s: nak delay of a transient fault, seconds.
        stream: the stream the durable consumer belongs to.
    """

    def __init__(
        self,
        nc: Client,
        consumer: Consumer,
        retry_delay_s: float = RETRY_DELAY_S,
        stream: str = catalog.STREAM,
    ) -> None:
        self._nc, self._consumer, self._retry_delay_s, self._stream = nc, consumer, retry_delay_s, stream
        self._inflight: set[asyncio.Task[None]] = set()
        self._running = False
        self._loop: asyncio.Task[None] | None = None
        self._max_deliver, self._ack_wait_s = consumer.spec.max_deliver, consumer.spec.ack_wait_s

    async def start(self) -> None:
        """Bind to the durable consumer and start fetching.

        Raises:
            nats.js.errors.NotFoundError: the consumer was not provisioned.
        """
        spec = self._consumer.spec
        info = await self._nc.jetstream().consumer_info(self._stream, spec.durable)
        self._max_deliver = info.config.max_deliver or -1
        self._ack_wait_s = info.config.ack_wait or spec.ack_wait_s
        puller = Puller(self._nc, self._stream, spec.durable)
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
            while self._running:
                free = self._consumer.max_workers - len(self._inflight)
                if free <= 0:
                    await asyncio.wait(set(self._inflight), return_when=asyncio.FIRST_COMPLETED)
                    continue
                if self._consumer.handle_batch is not None:
                    await self._dispatch_batch(await self._fetch(puller, self._consumer.batch_size))
                    continue
                for msg in await self._fetch(puller, free):
                    await (self._dispatch(msg) if self._running else self._hand_back(msg))
        finally:
            await puller.stop()

    async def _fetch(self, puller: Puller, batch: int) -> list[Msg]:
        try:
            return await puller.fetch(batch, wait_s=1.0)
        except nats.errors.Error as error:  # reconnecting, draining: the consumer keeps every message
            log.warning("%s: fetch failed (%s); retrying", self._consumer.spec.durable, type(error).__name__)
            await asyncio.sleep(0.5)
            return []

    async def _hand_back(self, msg: Msg) -> None:
        """Fetched while stopping: give it back at once, for another worker or the next start."""
        with contextlib.suppress(nats.errors.Error):
            await msg.nak(delay=HAND_BACK_S)

    async def _dispatch_batch(self, msgs: list[Msg]) -> None:
        if not self._running:
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
        task = asyncio.create_task(self._process(msg))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

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
