"""How far a streaming call is, heard while it runs.

The executor relays a running streaming operation's progress as
:class:`~effectgate.contracts.tools.hosting.CallProgress` on core NATS,
``tg.progress.<principal>.<request_id>`` (:meth:`Subjects.progress`): nothing is stored, so only
what is published while the client listens is heard. Only the executor may publish there and only
the agent ``<principal>`` may subscribe (:mod:`effectgate.contracts.bus.nats_permissions`).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Callable

import msgspec
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.tools.hosting import CallProgress

__all__ = ["OnProgress", "followed"]

log = logging.getLogger("effectgate.sdk")

OnProgress = Callable[[int, str], object]
"""``on_progress(items, message)``: ``items`` yielded so far (at least 0), the tool's message (may be empty).
It may be a coroutine function; what it raises is logged, never raised to the call."""

_decode = msgspec.json.Decoder(CallProgress)


@contextlib.asynccontextmanager
async def followed(nc: Client, principal: str, request_id: str, on_progress: OnProgress) -> AsyncIterator[None]:
    """Call ``on_progress`` for each progress of ``request_id`` heard while the block runs; never after it.

    A message that is no :class:`CallProgress` of this request (another request id, a negative
    count, not JSON) is dropped and logged.
    """

    async def heard(msg: Msg) -> None:
        if (progress := _progress_of(msg.data, request_id)) is None:
            log.warning("progress of request %s dropped: not a CallProgress of it", request_id)
            return
        try:
            answer = on_progress(progress.items, progress.message)
            if inspect.isawaitable(answer):
                await answer
        except Exception:  # the caller's callback: its faults are not the call's
            log.exception("on_progress of request %s raised", request_id)

    subscription = await nc.subscribe(Subjects.progress(principal, request_id), cb=heard)
    try:
        yield
    finally:
        with contextlib.suppress(nats.errors.Error):  # closed or draining: nothing is delivered any more
            await subscription.unsubscribe()


def _progress_of(data: bytes, request_id: str) -> CallProgress | None:
    try:
        progress = _decode.decode(data)
    except msgspec.DecodeError:
        return None
    return progress if progress.request_id == request_id and progress.items >= 0 else None
