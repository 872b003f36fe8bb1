"""Pulling from a durable JetStream consumer without trusting message headers."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

__all__ = ["HAND_BACK_S", "Puller"]

NO_WAIT_S = 0.5
"""How long an open request is still counted on beyond its own expiry, seconds."""

HAND_BACK_S = 2.0
"""Delay of a message a stopping worker hands back, seconds: longer than its open pull request
lives (``wait_s``, 1 s, plus :data:`NO_WAIT_S`), so the message goes to another worker instead of
back into the stopping one's request (which cannot be withdrawn)."""


class Puller:
    """One standing pull request on a durable consumer, answered on a private inbox (JetStream pull API).

    ``$JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>`` with ``{"batch", "expires"}``: the server
    holds the request and delivers each message as soon as it is stored, until ``batch``
    messages went out or the request expired (its status on the request's own reply
    subject). At most one request is open at a time and it asks for no more messages than
    the caller has room for, so nothing is delivered that no handler takes. Compared with
    asking ``no_wait`` first and then waiting for one message, a busy consumer makes one
    request per batch instead of two per message.

    A stored message is recognised by its acknowledgement subject
    (``$JS.ACK.<stream>.<durable>.…``), never by its headers: anything else on the inbox is
    the server's status for a request (no messages, request timeout). So a publisher's own
    ``Status`` header — which nats-py's ``fetch`` takes for a server status and drops,
    leaving the message undelivered and unacknowledged forever — cannot hide a stored
    message from its consumer.

    Args:
        nc: the connection.
        stream / durable: the consumer.
        api_prefix: the JetStream API prefix the connection's user calls (``$JS.API``, or the name its
            account imports the API under).
    """

    def __init__(self, nc: Client, stream: str, durable: str, api_prefix: str = "$JS.API") -> None:
        self._nc, self._inbox = nc, nc.new_inbox()
        self._next = f"{api_prefix}.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._acks = f"$JS.ACK.{stream}.{durable}."
        self._stored: collections.deque[Msg] = collections.deque()
        self._arrived = asyncio.Event()
        self._subscription: Subscription | None = None
        self._requests, self._open, self._remaining, self._open_until = 0, "", 0, 0.0

    async def start(self) -> None:
        """Subscribe to the inbox the requests are answered on."""
        self._subscription = await self._nc.subscribe(f"{self._inbox}.*", cb=self._arrive)

    async def stop(self) -> None:
        """Unsubscribe; messages delivered but not taken are handed back (:data:`HAND_BACK_S`)."""
        if self._subscription is not None:
            with contextlib.suppress(nats.errors.Error):
                await self._subscription.unsubscribe()
        await self.hand_back()

    async def hand_back(self) -> None:
        """Nak every message delivered but not taken (:data:`HAND_BACK_S`), for another worker to take."""
        while self._stored:
            with contextlib.suppress(nats.errors.Error):
                await self._stored.popleft().nak(delay=HAND_BACK_S)

    async def fetch(self, batch: int, wait_s: float, max_bytes: int = 0) -> list[Msg]:
        """Up to ``batch`` stored messages, waiting at most ``wait_s`` seconds when there are none.

        ``max_bytes`` (0: no bound) bounds the bytes one new request may deliver (the pull
        request's own ``max_bytes``, nats-server 2.8+): the server ends the request before a
        message that would pass it. A message larger than ``max_bytes`` is never delivered, so
        it must be at least the server's ``max_payload`` and its headers.

        Messages already delivered are returned at once. Otherwise, when no request is
        open, one is made for ``batch`` messages that the server holds for ``wait_s``; the
        call returns as soon as a message arrives, the request ends, or ``wait_s`` passed.

        Raises:
            nats.errors.Error: a request could not be sent (disconnected, draining).
        """
        if not self._stored:
            self._arrived.clear()
            await self._ask(batch, wait_s, max_bytes)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), wait_s)
            await asyncio.sleep(0)  # messages already read from the socket join the first one
        return [self._stored.popleft() for _ in range(min(batch, len(self._stored)))]

    async def _ask(self, batch: int, wait_s: float, max_bytes: int) -> None:
        """Open a request for ``batch`` messages unless one is still open."""
        now = asyncio.get_running_loop().time()
        if self._open and now < self._open_until:
            return
        self._requests += 1
        reply = f"{self._inbox}.{self._requests}"
        self._open, self._remaining, self._open_until = reply, batch, now + wait_s + NO_WAIT_S
        body = {"batch": batch, "expires": int(wait_s * 1e9)} | ({"max_bytes": max_bytes} if max_bytes else {})
        await self._nc.publish(self._next, json.dumps(body).encode(), reply=reply)

    async def _arrive(self, msg: Msg) -> None:
        """A stored message is kept for the next fetch; a status on the open request's subject ends it."""
        if msg.reply.startswith(self._acks):
            self._stored.append(msg)
            self._remaining -= 1
            if self._remaining <= 0:
                self._open = ""
        elif msg.subject == self._open:
            self._open = ""
        else:
            return  # the status of a request already over
        self._arrived.set()
