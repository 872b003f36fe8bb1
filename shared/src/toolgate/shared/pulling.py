"""Pulling from a durable JetStream consumer without trusting message headers."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

__all__ = ["Puller"]

NO_WAIT_S = 0.5
"""How long an answer to a request is awaited beyond what the request itself waits, seconds."""


class Puller:
    """Pull requests on one durable consumer, answered on a private inbox (JetStream pull API).

    ``$JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>`` with ``{"batch", "expires"}``. A stored
    message is recognised by its acknowledgement subject (``$JS.ACK.<stream>.<durable>.…``),
    never by its headers: anything else on the inbox is the server's status for a request
    (no messages, request timeout). So a publisher's own ``Status`` header — which nats-py's
    ``fetch`` takes for a server status and drops, leaving the message undelivered and
    unacknowledged forever — cannot hide a stored message from its consumer.

    Args:
        nc: the connection.
        stream / durable: the consumer.
    """

    def __init__(self, nc: Client, stream: str, durable: str) -> None:
        self._nc, self._inbox = nc, nc.new_inbox()
        self._next = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._acks = f"$JS.ACK.{stream}.{durable}."
        self._queue: asyncio.Queue[Msg] = asyncio.Queue()
        self._subscription: Any = None
        self._requests = 0

    async def start(self) -> None:
        """Subscribe to the inbox the requests are answered on."""
        self._subscription = await self._nc.subscribe(f"{self._inbox}.*", cb=self._queue.put)

    async def stop(self) -> None:
        """Unsubscribe (messages pulled but not yet taken come back after their ack wait)."""
        with contextlib.suppress(nats.errors.Error):
            await self._subscription.unsubscribe()

    async def fetch(self, batch: int, wait_s: float) -> list[Msg]:
        """Up to ``batch`` stored messages, waiting at most ``wait_s`` seconds when there are none.

        First a ``no_wait`` request for what is there now; only when that is nothing, a
        request for one message that the server holds for ``wait_s``. No request outlives
        this call with messages still to come, so nothing is delivered that no handler takes.

        Raises:
            nats.errors.Error: a request could not be sent (disconnected, draining).
        """
        found = await self._request({"batch": batch, "no_wait": True}, NO_WAIT_S)
        if found:
            return found
        return await self._request({"batch": 1, "expires": int(wait_s * 1e9)}, wait_s + NO_WAIT_S)

    async def _request(self, body: dict[str, Any], wait_s: float) -> list[Msg]:
        self._requests += 1
        reply, batch = f"{self._inbox}.{self._requests}", int(body["batch"])
        await self._nc.publish(self._next, json.dumps(body).encode(), reply=reply)
        found: list[Msg] = []
        deadline = asyncio.get_running_loop().time() + wait_s
        while len(found) < batch and (msg := await self._take(deadline)) is not None:
            if msg.reply.startswith(self._acks):
                found.append(msg)
            elif msg.subject == reply:
                break  # the server's status for this request (no messages, timeout): it is over
        return found

    async def _take(self, deadline: float) -> Msg | None:
        try:
            return await asyncio.wait_for(self._queue.get(), max(deadline - asyncio.get_running_loop().time(), 0))
        except TimeoutError:
            return None
