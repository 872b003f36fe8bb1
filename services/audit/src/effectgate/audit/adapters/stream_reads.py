"""Reading the record stream by sequence: the messages missing before a batch (:mod:`effectgate.audit.gaps`)."""

from __future__ import annotations

from datetime import UTC, datetime

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg

from effectgate.audit.gaps import ReadNext
from effectgate.contracts.bus.catalog import STREAM
from effectgate.shared.consumer.consumers import Delivery

__all__ = ["next_reader", "stream_delivery"]


def next_reader(js: JetStreamContext, filter_subject: str | None) -> ReadNext:
    """:data:`ReadNext` over :data:`STREAM`: the first message of ``filter_subject`` (``None``: any) from a sequence on.

    ``$JS.API.STREAM.MSG.GET`` with ``seq`` and ``next_by_subj``; a read that fails raises
    ``nats.errors.Error`` (the batch is retried).
    """

    async def read_next(seq: int) -> Delivery | None:
        try:
            message = await js.get_msg(STREAM, seq, subject=filter_subject or ">", next=True)
        except nats.js.errors.NotFoundError:
            return None
        return stream_delivery(message)

    return read_next


def stream_delivery(message: RawStreamMsg) -> Delivery:
    """A message read from the stream by sequence, as a delivery (``num_delivered`` 0: it is not acknowledged)."""
    return Delivery(
        subject=message.subject or "",
        data=message.data or b"",
        headers={str(key): str(value) for key, value in (message.headers or {}).items()},
        stream_seq=message.seq or 0,
        num_delivered=0,
        stored_at=message.time or datetime.now(UTC),
    )
