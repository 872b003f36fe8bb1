"""The record stream filled to a byte or message limit, for tests of what a full store answers."""

from __future__ import annotations

import nats
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, StreamConfig

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.bus.stream_limits import store_full
from effectgate.shared.stores.provision import stream_config

__all__ = ["MAX_FILLERS", "fill_record_stream"]

MAX_FILLERS = 10_000
"""Publishes of 200 bytes after which a stream that still takes them is not honouring its limits."""


async def fill_record_stream(js: JetStreamContext, **limits: object) -> None:
    """Give the record stream ``limits`` and the ``new`` discard policy, then fill it as principal ``filler``.

    ``limits``: stream config fields (``max_bytes=4096``, ``max_msgs=3``); publishing stops at the first refusal.

    Raises:
        AssertionError: the refusal is not a full store, or none came within :data:`MAX_FILLERS` publishes
            (nats-server 2.9 drops the oldest message at ``max_bytes`` instead of refusing the new one).
    """
    config = {**stream_config().as_dict(), **limits, "discard": DiscardPolicy.NEW}
    await js.update_stream(StreamConfig.from_response(config))
    for _ in range(MAX_FILLERS):
        try:
            await js.publish(Subjects.request("filler"), b"x" * 200, stream=catalog.STREAM)
        except nats.js.errors.APIError as error:
            assert store_full(error), error
            return
    raise AssertionError(f"the record stream took {MAX_FILLERS} messages past its limits {limits}: not refused")
