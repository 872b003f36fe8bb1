"""An agent's first connection: a few quiet attempts with backoff, then one error naming the URL.

nats-py retries a first connection as often as it retries a lost one (``max_reconnect_attempts``,
``reconnect_time_wait``) and reports every failed attempt to the error callback: by default 30
attempts over 30 s and 30 log lines. An agent that starts before the gateway wants a short,
quiet wait instead, and a connection that, once made, reconnects as long as the caller asked.

So each attempt here is one ``nats.connect`` with ``allow_reconnect=False`` (nothing reported
while connecting), :data:`RETRY_DELAYS_S` apart; once connected, the caller's reconnect
settings are put back in ``nc.options`` (read by nats-py at each disconnection) and the
caller's error callback starts hearing about the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import nats
from nats.aio.client import Client

from toolgate.contracts.errors import described
from toolgate.contracts.nats_credentials import redact
from toolgate.sdk.errors import BusUnreachable

__all__ = ["RETRY_DELAYS_S", "connect_quietly"]

RETRY_DELAYS_S = (0.25, 0.5, 1.0, 1.5, 2.0)
"""Seconds between attempts: six attempts within about 5 s of waiting."""

ErrorCallback = Callable[[Exception], Awaitable[None]]
_ONE_ATTEMPT = {"allow_reconnect": False, "max_reconnect_attempts": 1, "reconnect_time_wait": 0.2}
_RECONNECT = tuple(_ONE_ATTEMPT)


def _relay(caller: ErrorCallback) -> tuple[ErrorCallback, Callable[[], None]]:
    """The error callback nats-py holds (silent until connected, then ``caller``), and what marks it connected."""
    connected = False

    async def relay(error: Exception) -> None:
        if connected:
            await caller(error)

    def now_connected() -> None:
        nonlocal connected
        connected = True

    return relay, now_connected


def _refused(error: BaseException) -> bool:
    return "authorization violation" in str(error).lower()


async def connect_quietly(url: str, error_cb: ErrorCallback, **options: Any) -> Client:
    """Connect to ``url`` in at most ``1 + len(RETRY_DELAYS_S)`` attempts, reporting nothing until connected.

    Args:
        url: the NATS server.
        error_cb: hears the connection's errors once it is connected.
        options: ``nats.connect`` options; their reconnect settings apply once connected.

    Raises:
        PermissionError: the server refused the credentials (at once: retrying never helps).
        BusUnreachable: no attempt connected (the message names the URL, credentials hidden,
            and the last reason).
    """
    (relay, now_connected), last = _relay(error_cb), ""
    kept = {name: options.pop(name) for name in _RECONNECT if name in options}
    for delay in (0.0, *RETRY_DELAYS_S):
        await asyncio.sleep(delay)
        try:
            nc = await nats.connect(url, error_cb=relay, **_ONE_ATTEMPT, **options)
        except (TimeoutError, OSError, nats.errors.Error) as error:
            if _refused(error):
                raise PermissionError(redact(f"NATS at {url} refused the credentials: {described(error)}")) from None
            last = described(error)
            continue
        nc.options.update({"allow_reconnect": True, **kept})
        now_connected()
        return nc
    waited = sum(RETRY_DELAYS_S)
    tried = f"{1 + len(RETRY_DELAYS_S)} attempts over {waited:g} s"
    raise BusUnreachable(redact(f"cannot reach NATS at {url} ({tried}): {last}"))
