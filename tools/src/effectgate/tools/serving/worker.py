"""A tool worker's bus edge: verified calls in, answers and progress out, announcements while it runs.

One :class:`Worker` instance takes the calls of ``tg.worker.<name>.call.*`` in the queue group
``worker-<name>`` (the instances of one name share the calls), checks each
(:func:`~effectgate.tools.serving.checks.checked_call`), runs it through an
:class:`~effectgate.tools.answering.Answering` in a task of its own (at most ``max_concurrent``
at once; a call above that is answered ``failed`` ``worker_busy``, retryable, unrun) and replies
with the :class:`WorkerAnswer`. Every :data:`ALIVE_INTERVAL_S` it announces what it serves on
``tg.worker.<name>.alive``; :meth:`Worker.stop` announces ``stopping``, takes no more calls, lets
the running ones finish within a grace and cancels the rest unanswered (the executor makes such
a write ``uncertain``, protocol :mod:`effectgate.contracts.tools.hosting`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from datetime import UTC, datetime

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from effectgate.contracts.errors import described
from effectgate.contracts.failpoints import failpoint
from effectgate.contracts.tools.hosting import (
    ALIVE_INTERVAL_S,
    WorkerAlive,
    WorkerAnswer,
    WorkerCall,
    WorkerProgress,
    WorkerSubjects,
)
from effectgate.tools.answering import Answering, Progress
from effectgate.tools.serving.checks import MAX_CALL_BYTES, Refused, checked_call, refusal

__all__ = ["MAX_PROGRESS_MESSAGE", "Worker", "instance_id"]

log = logging.getLogger("effectgate.tools.worker")
security_log = logging.getLogger("effectgate.tools.security")

MAX_PROGRESS_MESSAGE = 1000
"""Characters of a progress message sent; longer ones are cut."""


def instance_id() -> str:
    """A fresh instance id: ``<host>-<pid>-<6 hex>`` (unique per start, readable by an operator)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Worker:
    """Serves ``answering`` on the bus as worker ``name`` (see the module's doc).

    Args:
        nc: a connection as NATS user ``worker-<name>``.
        answering: runs verified calls (the dispatcher of the served module).
        name: the worker's name (``adapters.SERVER_NAME``), the ``<worker>`` of ``python:<worker>``.
        executor_key: the executor's Ed25519 public key, which every call must be signed by.
        instance: this instance's id (default :func:`instance_id`).
        max_concurrent: calls run at once; one more is answered ``worker_busy``.
        max_call_bytes: the largest call read; a larger one is refused ``call_too_large``.
        alive_interval_s: seconds between announcements.
    """

    def __init__(
        self,
        nc: Client,
        answering: Answering,
        name: str,
        executor_key: Ed25519PublicKey,
        *,
        instance: str | None = None,
        max_concurrent: int = 16,
        max_call_bytes: int = MAX_CALL_BYTES,
        alive_interval_s: float = ALIVE_INTERVAL_S,
    ) -> None:
        self.nc, self.answering, self.name, self.key = nc, answering, name, executor_key
        self.instance = instance or instance_id()
        self.max_concurrent, self.max_call_bytes = max_concurrent, max_call_bytes
        self.alive_interval_s = alive_interval_s
        self.running: set[asyncio.Task[None]] = set()
        self._subscription: Subscription | None = None
        self._announcing: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Subscribe in the queue group, then announce, and go on announcing every ``alive_interval_s``.

        The subscription is flushed to the server before the first announcement, so an executor that
        hears the worker finds it subscribed.
        """
        subject, queue = WorkerSubjects.calls(self.name), WorkerSubjects.queue(self.name)
        self._subscription = await self.nc.subscribe(subject, queue=queue, cb=self._received)
        await self.nc.flush()
        await self.announce()
        self._announcing = asyncio.create_task(self._keep_announcing())

    async def stop(self, grace_s: float = 30.0) -> None:
        """Announce ``stopping``, take no more calls, wait ``grace_s`` seconds for the running ones, cancel the rest.

        A cancelled call is never answered.
        """
        if self._announcing is not None:
            self._announcing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._announcing
        await self.announce(stopping=True)
        if self._subscription is not None:
            await self._subscription.drain()  # type: ignore[no-untyped-call]
        if self.running:
            _, late = await asyncio.wait(set(self.running), timeout=grace_s)
            for task in late:
                task.cancel()
            if late:
                log.warning("%d call(s) still running after %g s: stopped unanswered", len(late), grace_s)
                await asyncio.wait(late)
        with contextlib.suppress(Exception):
            await self.nc.flush(timeout=2)

    async def announce(self, stopping: bool = False) -> None:
        """Publish one :class:`WorkerAlive`: the tools served, this instance, now (UTC)."""
        alive = WorkerAlive(
            worker=self.name,
            instance=self.instance,
            tools=self.answering.served(),
            at=datetime.now(UTC),
            stopping=stopping,
        )
        try:
            await self.nc.publish(WorkerSubjects.alive(self.name), msgspec.json.encode(alive))
        except Exception as error:  # a lost connection must not end the worker
            log.warning("announcement not sent: %s", described(error))

    async def _keep_announcing(self) -> None:
        while True:
            await asyncio.sleep(self.alive_interval_s)
            await self.announce()

    async def _received(self, msg: Msg) -> None:
        checked = checked_call(msg.data, msg.subject, self.name, self.key, self.max_call_bytes)
        if isinstance(checked, Refused):
            (security_log if checked.security else log).warning(
                "%scall %r on %s refused (%s): %s",
                "SECURITY: " if checked.security else "",
                checked.call_id,
                msg.subject,
                checked.reason_code,
                checked.reason,
            )
            await self._reply(msg, refusal(checked, self.name, self.instance))
        elif len(self.running) >= self.max_concurrent:
            await self._reply(msg, self._busy(checked))
        else:
            task = asyncio.create_task(self._run(msg, checked))
            self.running.add(task)
            task.add_done_callback(self.running.discard)

    def _busy(self, call: WorkerCall) -> WorkerAnswer:
        reason = f"{self.max_concurrent} calls already run on instance {self.instance}: nothing ran"
        return self._answer(call, "failed", "worker_busy", reason, retryable=True)

    async def _run(self, msg: Msg, call: WorkerCall) -> None:
        """Answer one verified call.

        Fail points ``worker.call`` (before the tool runs) and ``worker.reply`` (after it ran, before
        the answer goes) let fault tests stop a worker at either side of an effect.
        """
        try:
            await failpoint("worker.call", call.context.request_id)
            answer = await self.answering.answer(call, self._progress(call))
            await failpoint("worker.reply", call.context.request_id)
        except Exception as error:  # the protocol says it never raises; fail closed if it does
            log.exception("call %s of %s: the dispatcher raised", call.call_id, call.tool)
            answer = self._answer(call, "uncertain", "worker_error", f"the worker failed: {described(error)}")
        await self._reply(msg, msgspec.structs.replace(answer, worker=self.name, instance=self.instance))

    def _answer(self, call: WorkerCall, outcome: str, code: str, reason: str, retryable: bool = False) -> WorkerAnswer:
        return msgspec.convert(
            {"call_id": call.call_id, "outcome": outcome, "reason_code": code, "reason": reason,
             "retryable": retryable, "worker": self.name, "instance": self.instance},
            WorkerAnswer,
        )  # fmt: skip

    def _progress(self, call: WorkerCall) -> Progress:
        """Publishes :class:`WorkerProgress` to ``call.progress`` when it is this worker's subject for the call."""
        own = call.progress == WorkerSubjects.progress(self.name, call.call_id)
        if call.progress and not own:
            log.warning("call %s: progress subject %s is not this worker's: none sent", call.call_id, call.progress)

        async def progress(items: int, message: str = "") -> None:
            if own and call.progress:
                said = WorkerProgress(call_id=call.call_id, items=items, message=message[:MAX_PROGRESS_MESSAGE])
                with contextlib.suppress(Exception):
                    await self.nc.publish(call.progress, msgspec.json.encode(said))

        return progress

    async def _reply(self, msg: Msg, answer: WorkerAnswer) -> None:
        """Answer ``msg``; an answer too large for the bus goes as one without its result (a write's: ``uncertain``)."""
        if not msg.reply:
            log.warning("call %r on %s has no reply subject: answered nobody", answer.call_id, msg.subject)
            return
        data = msgspec.json.encode(answer)
        if len(data) > self.nc.max_payload:
            data = msgspec.json.encode(_without_result(answer, len(data), self.nc.max_payload))
        try:
            await self.nc.publish(msg.reply, data)
        except Exception as error:  # the executor hears nothing: its timeout decides
            log.warning("answer to call %s not sent: %s", answer.call_id, described(error))


def _without_result(answer: WorkerAnswer, size_bytes: int, limit_bytes: int) -> WorkerAnswer:
    """``answer`` without its result: ``ok`` becomes ``uncertain`` (it ran, but what it returned is lost)."""
    outcome = "uncertain" if answer.outcome == "ok" else answer.outcome
    reason = f"the answer is {size_bytes} bytes, above the bus's {limit_bytes}: its result was dropped"
    return msgspec.structs.replace(answer, outcome=outcome, reason_code="answer_too_large", reason=reason, result=None)
