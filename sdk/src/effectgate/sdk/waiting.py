"""Waiting for a receipt: heard on the principal's receipts subject, read back only where missed.

The client subscribes to ``tg.receipt.<principal>.*`` when it connects, so before any request
it sends (on the same connection: the server has the subscription before the request). A receipt
it may have missed is read back from the stream by the executor (:mod:`effectgate.sdk.records`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ReceiptIssued
from effectgate.sdk.errors import RecordsNoAnswer
from effectgate.sdk.receipts import ReceiptVerifier
from effectgate.sdk.records import RecordReader

__all__ = ["MAX_UNCLAIMED", "RECONNECT_LOOK_S", "ReceiptWaiter"]

RECONNECT_LOOK_S = 1.0
"""While a receipt is awaited, how often the client checks whether its connection was re-made (seconds)."""

MAX_UNCLAIMED = 10_000
"""Requests whose receipt nobody has asked for yet, kept at most (the oldest are forgotten:
``receipt()`` then reads it from the stream), so a client that submits without waiting, or
hears another process's receipts of its principal, does not grow without bound."""


class ReceiptWaiter:
    """The receipts of one principal's requests, each waited for until it comes or the wait runs out.

    Args:
        nc: the client's connection (receipts are heard and read on it).
        principal: whose receipts these are.
        verifier: what is believed on the receipts subject.
    """

    def __init__(self, nc: Client, principal: str, verifier: ReceiptVerifier) -> None:
        self._nc, self.principal, self._verifier = nc, principal, verifier
        self._records = RecordReader(nc, principal)
        self._waiting: dict[str, asyncio.Future[ReceiptIssued]] = {}
        self._arrived: dict[str, ReceiptIssued] = {}
        self._covered: dict[str, int] = {}
        """request id → the connection's reconnect count when its receipt was last known to be covered."""
        self._subscription: Any = None

    async def start(self) -> None:
        """Subscribe to this principal's receipts."""
        self._subscription = await self._nc.subscribe(Subjects.receipts_of(self.principal), cb=self._on_receipt)

    async def _on_receipt(self, msg: Msg) -> None:
        issued = self._mine(msg.subject, self._verifier.verified(msg.data))
        if issued is None:
            return
        future = self._waiting.get(issued.request_id)
        if future is None:
            self.keep(issued)
        elif not future.done():
            future.set_result(issued)

    def keep(self, issued: ReceiptIssued) -> None:
        """Keep a receipt nobody waits for yet (at most :data:`MAX_UNCLAIMED`, the oldest forgotten first)."""
        self._arrived[issued.request_id] = issued
        while len(self._arrived) > MAX_UNCLAIMED:
            del self._arrived[next(iter(self._arrived))]

    def expect(self, request_id: str) -> None:
        """Be ready for ``request_id``'s receipt; called before its request is published."""
        self._waiting.setdefault(request_id, asyncio.get_running_loop().create_future())
        while len(self._waiting) > MAX_UNCLAIMED:
            self.forget(next(iter(self._waiting)))  # its receipt, if asked for, is read from the stream
        if self._subscription is not None:  # subscribed before the request is sent: its receipt is heard
            self._covered[request_id] = self._reconnects()

    def forget(self, request_id: str) -> None:
        """Wait no more for ``request_id`` (not accepted, or its wait ended)."""
        self._waiting.pop(request_id, None)
        self._covered.pop(request_id, None)

    async def receipt(self, request_id: str, timeout_s: float) -> ReceiptIssued:
        """The receipt of ``request_id``, heard or read within ``timeout_s`` seconds (module docstring).

        Raises:
            TimeoutError: no receipt in time.
        """
        if request_id in self._arrived:
            return self._arrived.pop(request_id)
        future = self._waiting.setdefault(request_id, asyncio.get_running_loop().create_future())
        deadline = asyncio.get_running_loop().time() + timeout_s
        try:
            found = await self._awaited(request_id, future, deadline)
            return found if found is not None else await self._last_look(request_id, timeout_s)
        finally:
            self.forget(request_id)

    async def _awaited(
        self, request_id: str, future: asyncio.Future[ReceiptIssued], deadline: float
    ) -> ReceiptIssued | None:
        """The receipt heard or read before ``deadline`` (loop time), else ``None``."""
        while not future.done():
            if self._may_have_missed(request_id) and (stored := await self._stored(request_id)) is not None:
                return stored
            remaining_s = deadline - asyncio.get_running_loop().time()
            if remaining_s <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(future), min(remaining_s, RECONNECT_LOOK_S))
        return future.result()

    async def _last_look(self, request_id: str, timeout_s: float) -> ReceiptIssued:
        """A receipt the subscription dropped (a slow consumer) is still found in the stream; else time out."""
        if self._nc.is_connected and (stored := await self._stored(request_id)) is not None:
            return stored
        raise TimeoutError(
            f"no receipt for request {request_id} within {timeout_s:g} s: it may still be waiting "
            "for an approval (ask again with receipt(); the receipt is kept in the stream)"
        )

    def _may_have_missed(self, request_id: str) -> bool:
        """Whether the subscription may have missed the receipt since it was last looked for (marks it looked for)."""
        reconnects = self._reconnects()
        missed = self._covered.get(request_id) != reconnects
        self._covered[request_id] = reconnects
        return missed

    def _reconnects(self) -> int:
        return int(self._nc.stats["reconnects"])

    async def _stored(self, request_id: str) -> ReceiptIssued | None:
        """The stored receipt of ``request_id`` as the executor reads it back; ``None``: none, or not now."""
        subject = Subjects.receipt(self.principal, request_id)
        try:
            stored = await self._records.read(subject)
        except RecordsNoAnswer:
            return None
        return None if stored is None else self._mine(subject, self._verifier.verified(stored))

    def _mine(self, subject: str, issued: ReceiptIssued | None) -> ReceiptIssued | None:
        """``issued`` if it is this principal's receipt of the request its subject names, else ``None``.

        A receipt the executor really signed, but for another principal or request, copied onto
        this subject (a server reply sent to a chosen subject can do that) is not an answer.
        """
        if issued is None or subject != Subjects.receipt(self.principal, issued.request_id):
            return None
        return issued if issued.principal == self.principal else None
