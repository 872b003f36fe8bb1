"""Events missing before a batch, read from the stream so that the chain keeps stream order.

A message delivered but not acknowledged when the audit stopped comes back only after the
consumer's ``ack_wait``, while later messages are delivered at once: JetStream redelivers, it
does not hold newer messages back. Appended as they come, the later messages would take the
earlier ones' places and the chain would be out of stream order for good.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from effectgate.shared.consumer.consumers import Delivery

__all__ = ["MAX_FILLED", "ReadNext", "in_stream_order"]

MAX_FILLED = 10_000
"""Most messages read from the stream for one batch (a larger gap is filled over several batches)."""

ReadNext = Callable[[int], Awaitable[Delivery | None]]
"""The consumer's first stream message at or after a stream sequence, ``None`` when there is none."""


async def in_stream_order(deliveries: Sequence[Delivery], top: int | None, read_next: ReadNext) -> list[Delivery]:
    """``deliveries`` and the messages missing before them, in stream order.

    An empty chain begins at the stream's first message, whichever message was delivered
    first. When more than :data:`MAX_FILLED` are missing, only the deliveries up to where the
    filling stopped are returned; the caller appends those and asks again for the rest.

    Args:
        deliveries: one batch, as delivered.
        top: the chain's last stream sequence (``None``: an empty chain).
        read_next: reads the stream (:data:`ReadNext`).

    Raises:
        nats.errors.Error: the stream could not be read (the batch is retried).
    """
    held, filled = {delivery.stream_seq for delivery in deliveries}, list[Delivery]()
    seq, last = (top or 0) + 1, max(held)
    while seq < last:
        if seq in held:
            seq += 1
            continue
        if len(filled) >= MAX_FILLED:
            break
        found = await read_next(seq)
        if found is None or found.stream_seq >= last:
            seq = last
            break
        filled += [] if found.stream_seq in held else [found]
        seq = found.stream_seq + 1
    kept = [delivery for delivery in deliveries if delivery.stream_seq < seq or seq >= last]
    return sorted([*kept, *filled], key=lambda delivery: delivery.stream_seq)
