"""Binding to a stream, consumer or bucket the bus owner may not have provisioned (or converged) yet.

The registry provisions the bus at its start; every other service may start first, or while a
stream is being scaled and its leader elected. A bind that finds nothing there yet (not found)
or JetStream briefly unavailable (a leader election, a server restarted while the service starts)
waits and tries again, with a delay growing to
:data:`MAX_DELAY_S`, logging one line when it starts waiting and at most one every
:data:`LOG_EVERY_S` after that: the service never dies of it, and the log stays bounded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats.errors
from nats.js.errors import NotFoundError, ServiceUnavailableError

__all__ = ["FIRST_DELAY_S", "LOG_EVERY_S", "MAX_DELAY_S", "WAITED_FOR", "bound"]

T = TypeVar("T")

log = logging.getLogger("effectgate.binding")

WAITED_FOR = (
    NotFoundError,
    ServiceUnavailableError,
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.OutboundBufferLimitError,
)
"""What a bind waits out: nothing provisioned there yet, JetStream electing a leader, the server
being restarted under the service while it starts (no answer, no responder, reconnecting)."""

FIRST_DELAY_S = 0.2
"""Delay before the second try, seconds; doubled after each miss."""

MAX_DELAY_S = 5.0
"""Longest delay between tries, seconds."""

LOG_EVERY_S = 30.0
"""After the first line, at most one line per this many seconds while still waiting."""


async def bound(what: str, bind: Callable[[], Awaitable[T]]) -> T:
    """``await bind()``, tried again while it raises one of :data:`WAITED_FOR` (never given up: cancel to stop).

    Args:
        what: names what is bound in the log, e.g. ``"consumer policy-requests"``.
        bind: makes one attempt.

    Raises:
        Whatever ``bind`` raises other than :data:`WAITED_FOR`.
    """
    delay_s, since, logged_at = FIRST_DELAY_S, time.monotonic(), -LOG_EVERY_S
    while True:
        try:
            return await bind()
        except WAITED_FOR as missing:
            now = time.monotonic()
            if now - logged_at >= LOG_EVERY_S:
                why = getattr(missing, "description", None) or type(missing).__name__
                log.warning(
                    "waiting for %s (%s) for %.0f s: not provisioned yet, or being moved", what, why, now - since
                )
                logged_at = now
        await asyncio.sleep(delay_s)
        delay_s = min(delay_s * 2, MAX_DELAY_S)
