"""The consumer worker's batch mode: the messages of one fetch decided in one handler call."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import nats.errors
from nats.aio.msg import Msg

from effectgate.shared.consumer.acks import Later, Settle, Settlement
from effectgate.shared.consumer.pulling import HAND_BACK_S
from effectgate.shared.consumer.request_log import request_scope
from effectgate.shared.runtime.tracing import consuming

if TYPE_CHECKING:
    from effectgate.shared.consumer.consumers import Delivery
    from effectgate.shared.consumer.worker import DurableWorker

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
        if held and not worker._consuming():
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
