"""Calls Python tools served by tool workers on the bus (adapter ``python:<worker>``).

Each attempt is one signed :class:`~effectgate.contracts.tools.hosting.WorkerCall` sent as a
NATS request to ``tg.worker.<worker>.call.<tool>`` (the workers of one name share a queue
group), under what remains of the call's deadline. What the answer means: :mod:`.answers`;
when an attempt is tried again: :mod:`.retries`; non-concurrent operations: :mod:`.serial`;
a streaming operation's progress: :mod:`.progress`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client
from nats.errors import MaxPayloadError, NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor, descriptor_digest
from effectgate.contracts.tools.hosting import CallContext, WorkerCall, WorkerSubjects
from effectgate.contracts.vocabulary import SideEffectClass
from effectgate.executor.adapters.python.answers import answered, decoded, no_answer, no_worker
from effectgate.executor.adapters.python.progress import ProgressRelay
from effectgate.executor.adapters.python.retries import Transient, backoff_s, retries, retry_policy
from effectgate.executor.adapters.python.serial import LEASE_MARGIN_S, Serializer, lock_key
from effectgate.executor.effects.binding import Guard
from effectgate.executor.errors import ExecutorError, ToolFailed, ToolRefused

__all__ = ["PythonToolHost"]

log = logging.getLogger("effectgate.executor")

_MARGIN_S = 0.25
"""How much earlier than the deadline a call gives its own answer, at most, seconds (as MCP calls do)."""


@dataclass(frozen=True)
class _Call:
    """What stays the same across the attempts of one call."""

    worker: str
    descriptor: ToolDescriptor
    spec: OperationSpec
    operation: str
    arguments: dict[str, Any]
    context: CallContext
    guard: Guard | None
    ends_at: float
    where: str
    unanswered: Callable[[], None] = field(default=lambda: None)
    """Called when an attempt was sent and no readable answer came (its worker may still run it)."""


class PythonToolHost:
    """The executor's side of the worker protocol (module doc).

    Args:
        nc: the executor's NATS connection.
        signing_key: the executor's Ed25519 key (the receipts key): workers verify each call with it.
        serializer: the lock of non-concurrent operations (Redis).
        progress: the relay of streaming calls' progress (default: one on ``nc``).
        clock: current UTC time (the context's deadline is read against it).
        sleep: waits between attempts (tests pass a recorder).
    """

    def __init__(
        self,
        nc: Client,
        signing_key: Ed25519PrivateKey,
        serializer: Serializer,
        *,
        progress: ProgressRelay | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._nc, self._key, self._serial = nc, signing_key, serializer
        self._progress = progress or ProgressRelay(nc)
        self._clock, self._sleep = clock, sleep

    async def call(
        self,
        worker: str,
        descriptor: ToolDescriptor,
        operation: str,
        arguments: dict[str, Any],
        context: CallContext,
        guard: Guard | None = None,
    ) -> Any:
        """Run ``operation`` of ``descriptor`` on worker ``worker`` until ``context.deadline``.

        Returns:
            the result, or an :class:`~effectgate.executor.effects.calling.Effected` when the
            worker named the target's id for the effect.

        Raises:
            ToolRefused: ``unknown_operation``, ``tool_unavailable`` (no worker), ``tool_busy`` /
                ``serialization_unavailable`` (the lock), ``arguments_too_large``, the worker's refusal.
            ToolFailed / ToolOutcomeUnknown: the worker's answer or its silence (:mod:`.answers`).
        """
        spec = descriptor.operations.get(operation)
        if spec is None:
            raise ToolRefused("unknown_operation", f"{descriptor.name} has no operation {operation!r}")
        left_s = (context.deadline - self._clock()).total_seconds() - min(_MARGIN_S, descriptor.timeout_s / 10)
        where = f"Python tool {worker}/{descriptor.name}.{operation}"
        call = _Call(worker, descriptor, spec, operation, arguments, context, guard, time.monotonic() + left_s, where)
        if spec.concurrency_safe:
            return await self._attempts(call)
        lease_s = descriptor.timeout_s + LEASE_MARGIN_S
        async with self._serial.held(lock_key(descriptor.name, spec, arguments), lease_s, left_s, where) as held:
            return await self._attempts(replace(call, unanswered=held.keep))

    async def _attempts(self, call: _Call) -> Any:
        """Attempt ``call`` until it ends, is no longer retried, or its deadline leaves no room."""
        policy, attempt, unknown = retry_policy(call.spec), 1, None
        while True:
            share = max(policy.attempts - attempt + 1, 1) if policy else 1
            try:
                return await self._attempt(call, attempt, (call.ends_at - time.monotonic()) / share)
            except Transient as fault:
                if fault.unknown:
                    unknown = fault
                    call.unanswered()
                wait_s = backoff_s(policy, attempt) if policy else 0.0
                if not retries(policy, fault.code, attempt) or time.monotonic() + wait_s >= call.ends_at:
                    raise _final(fault, unknown, call.spec) from None
                log.info("%s: attempt %d ended %s; again in %.2fs", call.where, attempt, fault.code, wait_s)
                await self._sleep(wait_s)
                attempt += 1

    async def _attempt(self, call: _Call, attempt: int, budget_s: float) -> Any:
        """One signed call to the worker, answered within ``budget_s`` seconds."""
        call_id = uuid.uuid4().hex
        progress = WorkerSubjects.progress(call.worker, call_id) if call.spec.streaming else None
        message = WorkerCall(
            call_id=call_id,
            tool=call.descriptor.name,
            version=call.descriptor.version,
            descriptor_digest=descriptor_digest(call.descriptor),
            operation=call.operation,
            arguments=call.arguments,
            context=call.context,
            attempt=attempt,
            progress=progress,
        )
        if budget_s <= 0:  # the lock's wait took the whole deadline
            raise ToolFailed("tool_timeout", f"{call.where}: its deadline passed before it was sent; nothing was sent")
        payload = msgspec.json.encode(sign_event(message, self._key))
        if call.guard is not None:
            await asyncio.to_thread(call.guard)  # the files as the approval bound them, checked last
        async with self._relayed(progress, call_id, call.context):
            data = await self._request(call, payload, budget_s)
        answer = decoded(data, call_id, call.where)
        if answer is None:
            raise no_answer(call.spec.side_effect_class, "malformed_reply", f"{call.where}: its answer is unreadable")
        return answered(answer, call.where)

    def _relayed(self, subject: str | None, call_id: str, context: CallContext) -> Any:
        return nullcontext() if subject is None else self._progress.relaying(subject, call_id, context)

    async def _request(self, call: _Call, payload: bytes, budget_s: float) -> bytes:
        subject = WorkerSubjects.call(call.worker, call.descriptor.name)
        try:
            reply = await self._nc.request(subject, payload, timeout=max(budget_s, 0.001))
        except NoRespondersError:
            raise no_worker(call.where) from None
        except NatsTimeout:
            reason = f"{call.where}: no answer within {budget_s:.2f}s"
            raise no_answer(call.spec.side_effect_class, "tool_timeout", reason) from None
        except MaxPayloadError:
            raise ToolRefused("arguments_too_large", f"{call.where}: the call is larger than the bus carries") from None
        return bytes(reply.data)


def _final(fault: Transient, unknown: Transient | None, spec: OperationSpec) -> ExecutorError:
    """What a call ends with: its last fault, unless an earlier attempt of a write may have done its effect."""
    if unknown is not None and unknown is not fault and spec.side_effect_class is not SideEffectClass.READ_ONLY:
        return unknown.error
    return fault.error
