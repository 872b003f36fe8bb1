"""The consumer worker's batch mode: the messages of one fetch decided in one handler call.

A :class:`~toolgate.shared.handling.Consumer` with a ``handle_batch`` (one worker only, so
stream order holds) is handed every message one fetch returned, up to its ``batch_size``,
and answers one settlement per message, in order. The worker's rules
(:mod:`toolgate.shared.handling`) hold for each message:

- the answers are settled in order up to the first that is neither ACK nor TERM; that
  message and every one after it are handed to the handler again, as a batch, after the
  first one's delay (a RETRY's back-off, doubling at each attempt from ``retry_delay_s`` to
  at most 30 s; a :class:`~toolgate.shared.settle.Later`'s own): nothing after a failing
  message is settled before it. The answers given for the messages after it are not used,
  so a handler must be idempotent, as it already is for redeliveries;
- an exception, a leaked cancellation or a handler running past ``handler_timeout_s`` is a
  RETRY of every message handed over (a batch whose one write failed is retried whole);
- while the batch is handled, each message of it not yet settled gets ``+WPI`` every third
  of ``ack_wait``;
- when the worker stops while a message is being retried, that message is given up on when
  this was its last delivery (the consumer's ``give_up``), and every message still held is
  handed back at once, in stream order, so it comes back in that order;
- the handler opens each message's request line and span itself, around the work it does
  for that message (:func:`message_scope`);
- after a batch smaller than ``batch_size`` the worker waits the consumer's
  ``batch_linger_s`` before fetching again, so that under load batches grow (fewer
  transactions, fetches and thread hops) while an idle consumer still answers its first
  message at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import nats.errors
from nats.aio.msg import Msg

from toolgate.shared.pulling import HAND_BACK_S
from toolgate.shared.request_log import request_scope
from toolgate.shared.settle import Later, Settle, Settlement
from toolgate.shared.tracing import consuming

if TYPE_CHECKING:
    from toolgate.shared.handling import Delivery, DurableWorker

__all__ = ["Answer", "answers", "handle_batch", "message_scope", "settled_count"]

Answer = Settlement | Sequence[Settlement]
"""What a handler returns: one settlement, or one per message of a batch."""


def answers(answer: Answer, count: int) -> list[Settlement]:
    """One handler's answer as a list of ``count`` settlements.

    Raises:
        ValueError: a batch handler answered for another number of messages.
    """
    found = [answer] if isinstance(answer, Settle | Later) else list(answer)
    if len(found) != count:
        raise ValueError(f"{len(found)} answers for {count} messages")
    return found


@contextlib.contextmanager
def message_scope(durable: str, subject: str, headers: dict[str, str] | None) -> Iterator[None]:
    """The request line and the span one message is handled in.

    The worker opens it around each handler call; a batch handler opens it itself, per message.
    """
    with request_scope(consumer=durable), consuming(durable, subject, headers):
        yield


def settled_count(outcomes: list[Settlement]) -> int:
    """How many answers, from the first on, are final (ACK or TERM) before the first that is not."""
    for index, outcome in enumerate(outcomes):
        if outcome is not Settle.ACK and outcome is not Settle.TERM:
            return index
    return len(outcomes)


async def handle_batch(worker: DurableWorker, msgs: list[Msg]) -> None:
    """Hand ``msgs`` (one fetch, in stream order) to the batch handler until each is settled (module doc)."""
    held = list(msgs)
    keepalive = asyncio.create_task(worker._keepalive(held))
    try:
        await _until_settled(worker, held, [worker._delivery(msg) for msg in msgs])
    finally:
        keepalive.cancel()


async def _until_settled(worker: DurableWorker, held: list[Msg], deliveries: list[Delivery]) -> None:
    attempt = 0
    while held:
        outcomes = await _handled(worker, deliveries)
        done = settled_count(outcomes)
        for msg, outcome in zip(held[:done], outcomes[:done], strict=True):
            await worker._settle(msg, outcome)
        del held[:done]
        deliveries, attempt = deliveries[done:], (1 if done else attempt + 1)
        if held and not worker._running:
            await _hand_back(worker, held, deliveries[0], outcomes[done])
            return
        if held:
            await asyncio.sleep(worker._in_place_delay_s(outcomes[done], attempt))


async def _handled(worker: DurableWorker, deliveries: list[Delivery]) -> list[Settlement]:
    handle = worker._consumer.handle_batch
    assert handle is not None  # the worker hands a batch only to a batch handler
    return await worker._guarded(lambda: handle(deliveries), deliveries[0], len(deliveries))


async def _hand_back(worker: DurableWorker, held: list[Msg], head: Delivery, outcome: Settlement) -> None:
    """Stopping: give up on the failing message if this was its last delivery; nak the rest at once, in order."""
    if head.last:
        outcome = await worker._given_up(head)
        if outcome is Settle.ACK or outcome is Settle.TERM:
            await worker._settle(held.pop(0), outcome)
    for msg in held:
        with contextlib.suppress(nats.errors.Error):
            await msg.nak(delay=HAND_BACK_S)
