"""What a service hands the broker edge: a handler bound to a durable consumer, and what it is handed.

A :class:`Consumer` names its durable consumer (:mod:`effectgate.contracts.bus.catalog`) and
its handler; :class:`~effectgate.shared.consumer.worker.DurableWorker` runs it by the rules of
:mod:`effectgate.shared.consumer.worker`, handing it each message as a :class:`Delivery`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from effectgate.contracts.bus import catalog
from effectgate.shared.consumer.acks import Settlement

__all__ = ["BATCH_SIZE", "Consumer", "Delivery", "GiveUp", "Handle", "HandleBatch"]


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
            (:mod:`effectgate.shared.consumer.batching`); only with ``max_workers=1``.
        batch_size: most messages one batch holds.
        batch_linger_s: after a batch smaller than ``batch_size``, how long to let messages
            gather before the next fetch, seconds (fewer, larger batches; each waits at most this more).
        fair_by: the principal of a message subject: messages are then fetched ahead and
            started principal by principal (:mod:`effectgate.shared.consumer.fairness`);
            ``None``: in stream order.
        active: whether this replica consumes now (e.g. it holds a lease,
            :mod:`effectgate.shared.runtime.leadership`); while it answers ``False`` nothing is
            fetched and what was delivered is handed back. ``None``: always.

    Raises:
        ValueError: ``handle_batch`` with more than one worker, or ``batch_size < 1``;
            ``fair_by`` with one worker, a batch handler (both keep stream order) or ``active``.
    """

    spec: catalog.ConsumerSpec
    handle: Handle
    give_up: GiveUp | None = None
    max_workers: int = 8
    handler_timeout_s: float | None = None
    handle_batch: HandleBatch | None = None
    batch_size: int = BATCH_SIZE
    batch_linger_s: float = 0.0
    fair_by: Callable[[str], str | None] | None = None
    active: Callable[[], bool] | None = None

    def __post_init__(self) -> None:
        if self.fair_by is not None and (
            self.max_workers == 1 or self.handle_batch is not None or self.active is not None
        ):
            raise ValueError(f"{self.spec.durable}: fair_by needs several workers, no batch handler, no active")
        if self.handle_batch is not None and (self.max_workers != 1 or self.batch_size < 1):
            raise ValueError(f"{self.spec.durable}: a batch handler needs max_workers=1 and batch_size >= 1")
