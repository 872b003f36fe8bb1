"""Announces each Python tool's state as its workers come and go, on ``tg.tool.state.<tool>``.

Subscribes to every worker's :class:`WorkerAlive` (``tg.worker.*.alive``, core NATS), keeps the
:class:`~.roster.Roster`, and after each announcement (and every ``sweep_s``) judges every published
``python:<worker>`` descriptor (the latest of each tool, from the tools bucket). A change is
published as :class:`ToolStateChanged` (``server``: the worker), as the MCP state announcer does;
the policy denies calls to an ``unavailable`` tool. Nothing is judged before ``grace_s`` after the
start, so live workers are heard before their tools are called unavailable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import msgspec
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ToolStateChanged, decode_untrusted
from effectgate.contracts.tools.descriptors import DescriptorSource, ToolDescriptor
from effectgate.contracts.tools.hosting import ALIVE_INTERVAL_S, ALIVE_TTL_S, WorkerAlive, WorkerSubjects
from effectgate.contracts.tools.tool_states import ToolState
from effectgate.executor.adapters.python.roster import MAX_INSTANCES, Roster, Verdict, worker_of
from effectgate.shared.stores.stream import publish_event

__all__ = ["WorkerLiveness"]

log = logging.getLogger("effectgate.executor")

_alive = msgspec.json.Decoder(WorkerAlive)


class WorkerLiveness:
    """Keeps Python tools' states (module doc).

    Args:
        ttl_s: how long an announcement counts, seconds.
        sweep_s: how often states are judged without an announcement, seconds.
        grace_s: how long after the start nothing is judged, seconds.
        clock: current UTC time (``since`` of a state).
    """

    def __init__(
        self,
        *,
        ttl_s: float = ALIVE_TTL_S,
        sweep_s: float = ALIVE_INTERVAL_S / 2,
        grace_s: float = ALIVE_INTERVAL_S * 1.5,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._roster = Roster(ttl_s)
        self._sweep_s, self._grace_s, self._clock = sweep_s, grace_s, clock
        self._announced: dict[str, Verdict] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._subscription: Subscription | None = None

    async def start(self, nc: Client, js: JetStreamContext, descriptors: DescriptorSource) -> None:
        """Hear announcements on ``nc``; publish the states of ``descriptors``' Python tools on ``js``."""
        self._subscription = await nc.subscribe(WorkerSubjects.ALIVE, cb=self._heard)
        self._task = asyncio.create_task(self._judge_all(js, descriptors), name="python-tool-states")

    async def stop(self) -> None:
        """Stop hearing and publishing (a connection already closed has dropped the subscription itself)."""
        if self._subscription is not None:
            with contextlib.suppress(nats.errors.Error):
                await self._subscription.unsubscribe()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _heard(self, msg: Msg) -> None:
        worker = WorkerSubjects.worker_of_alive(msg.subject)
        try:
            alive = decode_untrusted(_alive, msg.data)
        except msgspec.DecodeError as error:
            log.warning("%s: not a WorkerAlive: %s", msg.subject, str(error)[:200])
            return
        if worker is None or alive.worker != worker:
            log.warning("%s: an announcement naming worker %r was ignored", msg.subject, alive.worker[:64])
            return
        if not self._roster.heard(worker, alive, time.monotonic()):
            log.warning(
                "%s: instance %r ignored: %d instances of it are live", msg.subject, alive.instance[:64], MAX_INSTANCES
            )
            return
        self._wake.set()

    async def _judge_all(self, js: JetStreamContext, descriptors: DescriptorSource) -> None:
        await asyncio.sleep(self._grace_s)
        while True:
            self._wake.clear()
            try:
                for descriptor in await descriptors.list():
                    await self._judge(js, descriptor)
            except Exception as error:  # the bucket or the stream unreachable: the next sweep tries again
                log.warning("Python tools' states could not be judged: %r", error)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._sweep_s)

    async def _judge(self, js: JetStreamContext, descriptor: ToolDescriptor) -> None:
        verdict = self._roster.verdict(descriptor, time.monotonic())
        if verdict is None or self._announced.get(descriptor.name) == verdict:
            return
        await publish_event(js, Subjects.tool_state(descriptor.name), self._event(descriptor, verdict))
        self._announced[descriptor.name] = verdict

    def _event(self, descriptor: ToolDescriptor, verdict: Verdict) -> ToolStateChanged:
        now, (state, reason) = self._clock(), verdict
        return ToolStateChanged(
            event_id=f"tool-state:{descriptor.name}:{uuid.uuid4().hex}",
            occurred_at=now,
            tool=descriptor.name,
            server=worker_of(descriptor) or "",
            state=ToolState(state=state, reason=reason, since=now),
        )
