"""Relays a streaming call's progress from its worker to its agent.

The executor subscribes to the call's own ``tg.worker.<worker>.progress.<call_id>`` for the
attempt and republishes each :class:`WorkerProgress` of that call as :class:`CallProgress` on
``tg.progress.<principal>.<request_id>`` (core NATS: progress is a hint, never the record; the
items themselves come with the answer). At most one relay per :attr:`ProgressRelay.min_interval_s`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import msgspec
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import decode_untrusted
from effectgate.contracts.tools.hosting import CallContext, CallProgress, WorkerProgress

__all__ = ["ProgressRelay"]

log = logging.getLogger("effectgate.executor")

_progress = msgspec.json.Decoder(WorkerProgress)
_MESSAGE_CHARS = 200
"""Longest progress message relayed."""


class ProgressRelay:
    """Relays the progress of streaming calls.

    Args:
        nc: the executor's connection.
        min_interval_s: shortest time between two relays of one call, seconds (more are dropped).
        scrub: the executor's secret rules over a message's text (default: none).
    """

    def __init__(self, nc: Client, min_interval_s: float = 0.1, scrub: Callable[[str], str] = str) -> None:
        self._nc, self.min_interval_s, self._scrub = nc, min_interval_s, scrub

    @asynccontextmanager
    async def relaying(self, subject: str, call_id: str, context: CallContext) -> AsyncIterator[None]:
        """Relay what arrives on ``subject`` for call ``call_id`` to ``context``'s agent while the block runs."""
        target = Subjects.progress(context.principal, context.request_id)
        last = [float("-inf")]

        async def relay(msg: Msg) -> None:
            try:
                progress = decode_untrusted(_progress, msg.data)
            except msgspec.DecodeError:
                log.warning("%s: a progress message that is no WorkerProgress was dropped", subject)
                return
            now = time.monotonic()
            if progress.call_id != call_id or now - last[0] < self.min_interval_s:
                return
            last[0] = now
            message = self._scrub(progress.message[:_MESSAGE_CHARS])
            item = CallProgress(request_id=context.request_id, items=progress.items, message=message)
            await self._nc.publish(target, msgspec.json.encode(item))

        subscription = await self._nc.subscribe(subject, cb=relay)
        try:
            yield
        finally:
            with contextlib.suppress(nats.errors.Error):  # a closed connection dropped it already
                await subscription.unsubscribe()
