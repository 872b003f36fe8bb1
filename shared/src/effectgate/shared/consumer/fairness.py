"""The consumer worker's fair mode: fetch ahead, then serve principals in turn.

A durable consumer delivers in stream order, so one principal's backlog stands in front of
every later message. In fair mode the worker keeps up to ``window`` delivered messages
waiting in :class:`Lanes` (one lane per principal, first in first out within a lane) and
starts the head of each lane in turn whenever a handler slot is free. Messages waiting are
kept alive with ``+WPI`` each third of the ack wait, so waiting uses no delivery attempt and
causes no redelivery; when the worker stops they are handed back. The argument and the
bound are in ``docs/explanation/performance.md`` ("Fair by principal").
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import nats.errors
from nats.aio.msg import Msg

from effectgate.shared.consumer.pulling import HAND_BACK_S, Puller

if TYPE_CHECKING:
    from effectgate.shared.consumer.worker import DurableWorker

__all__ = ["Lanes", "fair_loop"]

WINDOW_BYTES = 64 * 1024 * 1024
"""Most bytes of message bodies and subjects one fair consumer holds waiting (it may pass this by
one fetch of at most the server's ``max_payload`` plus :data:`HEADROOM_BYTES`)."""

HEADROOM_BYTES = 64 * 1024
"""Bytes a fetch's ``max_bytes`` allows beyond ``max_payload``: a message's subject, headers and framing."""

WAKE_S = 1.0
"""Longest the loop waits before it looks again whether the worker is stopping, seconds."""

LaneOf = Callable[[str], str | None]
"""The lane of a message subject (its principal); ``None``: the lane of every foreign subject."""


class Lanes:
    """Messages waiting to be handled, one first-in-first-out lane per principal, served in turn.

    Args:
        lane_of: the lane of a subject (:data:`LaneOf`).
        cap: most messages of one lane running at once; a lane at its cap is passed over.
    """

    def __init__(self, lane_of: LaneOf, cap: int) -> None:
        self._lane_of, self._cap = lane_of, cap
        self._lanes: dict[str | None, collections.deque[Msg]] = {}
        self._turns: collections.deque[str | None] = collections.deque()
        self._running: collections.Counter[str | None] = collections.Counter()
        self._count, self.size_bytes = 0, 0

    def __len__(self) -> int:
        return self._count

    def put(self, msg: Msg) -> None:
        """Queue ``msg`` at the end of its principal's lane (a new lane takes the last turn)."""
        lane = self._lane_of(msg.subject)
        if lane not in self._lanes:
            self._lanes[lane] = collections.deque()
            self._turns.append(lane)
        self._lanes[lane].append(msg)
        self._count += 1
        self.size_bytes += _size_bytes(msg)

    def take(self) -> Msg | None:
        """The head of the first lane in turn that is below its cap; ``None`` when no lane may start one.

        The lane it came from goes last in the turns (or is dropped when empty); it counts as
        running until :meth:`finished`.
        """
        for _ in range(len(self._turns)):
            lane = self._turns.popleft()
            if self._running[lane] < self._cap:
                return self._taken(lane)
            self._turns.append(lane)  # at its cap: passed over
        return None

    def finished(self, msg: Msg) -> None:
        """``msg`` (taken before) is no longer running."""
        lane = self._lane_of(msg.subject)
        self._running[lane] -= 1
        if self._running[lane] <= 0:
            del self._running[lane]

    def _taken(self, lane: str | None) -> Msg:
        waiting = self._lanes[lane]
        msg = waiting.popleft()
        self._count -= 1
        self.size_bytes -= _size_bytes(msg)
        self._running[lane] += 1
        if waiting:
            self._turns.append(lane)  # its next turn comes after every other lane's
        else:
            del self._lanes[lane]
        return msg

    def waiting(self) -> list[Msg]:
        """Every waiting message (a snapshot)."""
        return [msg for lane in self._lanes.values() for msg in lane]


def _size_bytes(msg: Msg) -> int:
    return len(msg.data or b"") + len(msg.subject)


async def fair_loop(worker: DurableWorker, puller: Puller, lane_of: LaneOf, window: int) -> None:
    """Fetch up to ``window`` messages ahead and start them lane by lane while the worker runs."""
    lanes, fetching = Lanes(lane_of, max(1, worker._consumer.max_workers - 1)), None
    keepalive = asyncio.create_task(_keep_waiting(worker, lanes))
    try:
        while worker._running:
            _start_in_turn(worker, lanes)
            if fetching is None and len(lanes) < window and lanes.size_bytes < WINDOW_BYTES:
                fetching = asyncio.create_task(_fetch(worker, puller, lanes, window))
            if await _fetched(worker, lanes, fetching) and fetching is not None:
                for msg in fetching.result():
                    lanes.put(msg)
                fetching = None
    finally:
        keepalive.cancel()
        fetched = await fetching if fetching is not None else []
        await _hand_back([*lanes.waiting(), *fetched])


async def _fetch(worker: DurableWorker, puller: Puller, lanes: Lanes, window: int) -> list[Msg]:
    """Up to the room left in the window, by count and by bytes (never less than one largest message)."""
    room_bytes = max(WINDOW_BYTES - lanes.size_bytes, worker._nc.max_payload + HEADROOM_BYTES)
    return await worker._fetch(puller, window - len(lanes), room_bytes)


def _start_in_turn(worker: DurableWorker, lanes: Lanes) -> None:
    """Start waiting messages, one lane after another, until every slot is taken or every waiting lane is at its cap."""
    while lanes and len(worker._inflight) < worker._consumer.max_workers:
        if (msg := lanes.take()) is None:
            return
        worker._start(msg).add_done_callback(functools.partial(_finished, lanes, msg))


def _finished(lanes: Lanes, msg: Msg, _: asyncio.Task[None]) -> None:
    lanes.finished(msg)


async def _fetched(worker: DurableWorker, lanes: Lanes, fetching: asyncio.Task[list[Msg]] | None) -> bool:
    """Wait for the fetch to return or, while messages wait, for a handler to end; whether the fetch returned.

    Returns within :data:`WAKE_S` in any case, so a stopping worker is seen.
    """
    waits: set[asyncio.Future[Any]] = {fetching} if fetching is not None else set()
    if lanes:  # waiting for a slot, or for a lane to drop below its cap
        waits |= set(worker._inflight)
    if not waits:
        await asyncio.sleep(WAKE_S)
        return False
    done, _ = await asyncio.wait(waits, timeout=WAKE_S, return_when=asyncio.FIRST_COMPLETED)
    return fetching in done


async def _keep_waiting(worker: DurableWorker, lanes: Lanes) -> None:
    """``+WPI`` each third of the ack wait for every waiting message: waiting is no delivery attempt."""
    interval = max(worker._ack_wait_s / 3, 1.0)
    while True:
        await asyncio.sleep(interval)
        for msg in lanes.waiting():
            with contextlib.suppress(nats.errors.Error):
                await msg.in_progress()


async def _hand_back(msgs: list[Msg]) -> None:
    """Stopping: messages fetched and never started go back for another worker or the next start."""
    for msg in msgs:
        with contextlib.suppress(nats.errors.Error):
            await msg.nak(delay=HAND_BACK_S)
