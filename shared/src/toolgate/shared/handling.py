"""The broker edge shared by all services: durable pull subscribers with manual acks.

Acknowledgement is explicit everywhere (a refusal is a value: ack; a transient
fault: nak with a delay; a forged or undecodable message: term). The handler given
to :func:`durable_subscriber` returns a :class:`Settle` telling which.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from faststream import AckPolicy
from faststream.nats import JStream, NatsMessage, NatsRouter, PullSub

from toolgate.shared import catalog
from toolgate.shared.settle import Settle

__all__ = ["Delivery", "Settle", "durable_subscriber", "raw_body"]

log = logging.getLogger("toolgate")

NAK_DELAY_S = 2.0
"""Delay before a transient fault is retried, seconds."""


@dataclass(frozen=True)
class Delivery:
    """One delivered stream message, in plain terms.

    Attributes:
        subject: the message subject.
        data: the raw body.
        headers: NATS headers (``{}`` when none).
        stream_seq: the message's stream sequence.
        num_delivered: delivery attempt, 1 for the first.
    """

    subject: str
    data: bytes
    headers: dict[str, str]
    stream_seq: int
    num_delivered: int


async def raw_body(msg: NatsMessage) -> bytes:
    """FastStream decoder that keeps the body as bytes.

    The services decode bodies themselves (``decode_untrusted``), so a hostile body (not
    JSON, nested too deeply) reaches the handler and ends in a refusal instead of failing
    inside the framework before any acknowledgement.
    """
    return bytes(msg.body)


def _delivery(msg: NatsMessage) -> Delivery:
    raw = msg.raw_message
    meta = raw.metadata
    return Delivery(raw.subject, raw.data or b"", dict(raw.headers or {}), meta.sequence.stream, meta.num_delivered)


async def _settle(msg: NatsMessage, outcome: Settle) -> None:
    if outcome is Settle.ACK:
        await msg.ack()
    elif outcome is Settle.RETRY:
        await msg.nack(delay=NAK_DELAY_S)
    else:
        await msg.reject()


def durable_subscriber(
    router: NatsRouter,
    spec: catalog.ConsumerSpec,
    handle: Callable[[Delivery], Awaitable[Settle]],
    max_workers: int = 8,
) -> None:
    """Attach ``handle`` to the durable pull consumer ``spec`` of the stream.

    An exception escaping ``handle`` is a transient fault: the message is nakked
    with :data:`NAK_DELAY_S` and redelivered (bounded by the consumer's ``max_deliver``).
    """

    async def on_message(msg: NatsMessage) -> None:
        try:
            outcome = await handle(_delivery(msg))
        except Exception:
            log.exception("handler of %s failed; retrying", spec.durable)
            outcome = Settle.RETRY
        await _settle(msg, outcome)

    subscriber = router.subscriber(
        spec.filter_subject or ">",
        stream=JStream(catalog.STREAM, declare=False),
        durable=spec.durable,
        pull_sub=PullSub(batch_size=16, timeout=1.0),
        ack_policy=AckPolicy.MANUAL,
        max_workers=max_workers if max_workers > 1 else None,  # one worker: the plain, ordered consumer
        decoder=raw_body,
        include_in_schema=False,
    )
    subscriber(on_message)
