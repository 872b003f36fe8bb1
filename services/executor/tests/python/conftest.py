"""Test support for Python tools: a responder speaking the worker protocol, and a host on the session's servers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from nats.aio.client import Client
from nats.aio.msg import Msg

from effectgate.contracts.integrity.signing import verify_body
from effectgate.contracts.tools.descriptors import OperationSpec, RetryPolicy, ToolDescriptor
from effectgate.contracts.tools.hosting import WorkerAnswer, WorkerCall, WorkerProgress, WorkerSubjects
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.executor.adapters.file_system import FileSystemTool
from effectgate.executor.adapters.python.host import PythonToolHost
from effectgate.executor.adapters.python.serial import Serializer
from effectgate.executor.adapters.tool_host import LocalToolHost

EXECUTOR = Ed25519PrivateKey.generate()
"""The executor's signing key in these tests."""

SCHEMA = {"type": "object", "properties": {"account": {"type": "string"}}}
RETRY = RetryPolicy(attempts=3, backoff_s=0.05, max_backoff_s=0.2)
READ, WRITE = SideEffectClass.READ_ONLY, SideEffectClass.FINANCIAL


def _op(side: SideEffectClass, output: dict[str, Any] | None = None, **fields: Any) -> OperationSpec:
    return OperationSpec(
        input_schema=SCHEMA, output_schema=output or {}, side_effect_class=side, risk_tier=RiskTier.LOW, **fields
    )


OPERATIONS = {
    "lookup": _op(READ, retry=RETRY),
    "lookup_busy_only": _op(READ, retry=RetryPolicy(attempts=3, backoff_s=0.05, on=("busy",))),
    "pay": _op(WRITE, retry=RETRY),
    "pay_idempotent": _op(WRITE, retry=RETRY, idempotent_at_target=True),
    "transfer": _op(WRITE, concurrency_safe=False, serialize_by="/account"),
    "close_books": _op(WRITE, concurrency_safe=False),
    "export": _op(READ, {"type": "array"}, streaming=True),
}


def bank(worker: str, timeout_s: float = 2.0) -> ToolDescriptor:
    """A Python tool of worker ``worker`` with one operation of each kind."""
    return ToolDescriptor(
        name=f"{worker}_bank", version="1.0.0", adapter=f"python:{worker}", operations=OPERATIONS, timeout_s=timeout_s
    )


Behave = Callable[[WorkerCall, "Responder"], Awaitable[WorkerAnswer | None]]


def ok(result: Any = None, **fields: Any) -> Behave:
    async def behave(call: WorkerCall, responder: Responder) -> WorkerAnswer:
        return WorkerAnswer(call_id=call.call_id, outcome="ok", result=result if result is not None else {}, **fields)

    return behave


@dataclass
class Responder:
    """A worker on the bus: answers each verified :class:`WorkerCall` as ``behave`` says (``None``: never).

    Attributes:
        calls: the verified calls, in arrival order.
        spans: ``(start, end)`` monotonic seconds of each answered or abandoned call.
        forged: calls whose signature did not verify (not answered).
    """

    nc: Client
    worker: str
    behave: Behave
    key: Ed25519PublicKey = field(default_factory=EXECUTOR.public_key)
    calls: list[WorkerCall] = field(default_factory=list)
    spans: list[tuple[float, float]] = field(default_factory=list)
    forged: int = 0
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> Responder:
        queue = WorkerSubjects.queue(self.worker)
        self._sub = await self.nc.subscribe(WorkerSubjects.calls(self.worker), queue=queue, cb=self._arrived)
        return self

    async def stop(self) -> None:
        await self._sub.unsubscribe()
        for task in self._tasks:
            task.cancel()

    async def _arrived(self, msg: Msg) -> None:  # each call on its own task: calls may overlap
        task = asyncio.create_task(self._answer(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, msg: Msg) -> None:
        if not verify_body(msgspec.json.decode(msg.data), self.key):
            self.forged += 1
            return
        call = msgspec.json.decode(msg.data, type=WorkerCall)
        self.calls.append(call)
        started = time.monotonic()
        try:
            answer = await self.behave(call, self)
        finally:
            self.spans.append((started, time.monotonic()))
        if answer is not None:
            await msg.respond(msgspec.json.encode(answer))

    async def progress(self, call: WorkerCall, items: int) -> None:
        assert call.progress is not None
        await self.nc.publish(call.progress, msgspec.json.encode(WorkerProgress(call_id=call.call_id, items=items)))


@pytest.fixture
def worker(ns: str) -> str:
    """This test's worker name."""
    return ns


@pytest_asyncio.fixture
async def responder(nc: Client, worker: str) -> AsyncIterator[Callable[[Behave], Awaitable[Responder]]]:
    """``await responder(behave)``: a worker named ``worker`` answering as ``behave`` says."""
    started: list[Responder] = []

    async def start(behave: Behave) -> Responder:
        started.append(await Responder(nc, worker, behave).start())
        return started[-1]

    yield start
    for one in started:
        await one.stop()


@pytest.fixture
def python_host(nc: Client, redis_client: aioredis.Redis) -> PythonToolHost:
    """The executor's Python tool host on the session's NATS and Redis."""
    return PythonToolHost(nc, EXECUTOR, Serializer(redis_client), clock=lambda: datetime.now(UTC))


@pytest.fixture
def tools(python_host: PythonToolHost, tmp_path: Any) -> LocalToolHost:
    """The executor's tool host with its Python tools."""
    return LocalToolHost(FileSystemTool(tmp_path), None, python_host)
