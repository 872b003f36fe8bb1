"""The two cheaper calls a governed call is compared with, on the stack's own nats-server and redis-server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig

from effectgate.cli.bench.floor_stage import FIRST, REQUEST_SUBJECT, SECOND, STREAM, done_subject
from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus.catalog import token_of
from effectgate.contracts.bus.nats_permissions import ADMIN
from effectgate.devstack.processes import end, owned

__all__ = ["ECHO", "bare_call", "floor_call", "floor_stages"]

ECHO = "bench.echo"
PAYLOAD = b'{"path":"data.txt"}'
"""The body of a bare call (the governed call's arguments)."""

FLOOR_PAYLOAD = b"x" * 384
"""The body of a floor call: about the size of a governed call's request event, bytes."""

READY_TIMEOUT_S = 30.0


def admin_options(stack: Stack) -> dict[str, Any]:
    """``nats.connect`` options of ``admin`` on a secured stack, none on an open one."""
    return stack.connect_options(ADMIN) if stack.has_user(ADMIN) else {}


@contextlib.asynccontextmanager
async def bare_call(stack: Stack) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """A bare request/reply call (an echo answered by a second connection), while inside.

    Raises:
        nats.errors.Error: the server cannot be reached.
    """
    options = admin_options(stack)
    servers = stack.nats_servers
    responder, client = await nats.connect(servers=servers, **options), await nats.connect(servers=servers, **options)

    async def echo(msg: Msg) -> None:
        await msg.respond(msg.data)

    await responder.subscribe(ECHO, cb=echo)
    await responder.flush()

    async def call() -> None:
        await client.request(ECHO, PAYLOAD, timeout=5)

    try:
        yield call
    finally:
        await client.close()
        await responder.close()


async def provision_floor(nc: Client) -> None:
    """The floor's stream (file storage, 2-minute duplicate window, like the record stream) and both consumers."""
    js = nc.jetstream()
    subjects = ["bench.floor.>"]
    config = StreamConfig(
        STREAM, subjects=subjects, retention=RetentionPolicy.LIMITS, storage=StorageType.FILE, duplicate_window=120.0
    )
    await js.add_stream(config)
    for stage in (FIRST, SECOND):
        consumer = ConsumerConfig(
            durable_name=stage.durable,
            filter_subject=stage.filter_subject,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=30.0,
            max_deliver=20,
        )
        await js.add_consumer(STREAM, consumer)


@contextlib.asynccontextmanager
async def floor_call(stack: Stack) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """One call through the transport floor (its stages must run: :func:`floor_stages`), while inside.

    Raises:
        nats.errors.Error: the server cannot be reached.
        TimeoutError: a call got no answer within 30 s.
    """
    nc = await nats.connect(servers=stack.nats_servers, **admin_options(stack))
    js, waiting = nc.jetstream(), dict[str, asyncio.Future[None]]()

    async def answered(msg: Msg) -> None:
        future = waiting.pop(token_of(done_subject(), msg.subject) or "", None)
        if future is not None and not future.done():
            future.set_result(None)

    await nc.subscribe(done_subject(), cb=answered)

    async def call() -> None:
        call_id = uuid.uuid4().hex
        waiting[call_id] = future = asyncio.get_running_loop().create_future()
        await js.publish(REQUEST_SUBJECT, FLOOR_PAYLOAD, stream=STREAM, headers={"Nats-Msg-Id": call_id})
        await asyncio.wait_for(future, 30.0)

    try:
        yield call
    finally:
        await nc.close()


@contextlib.contextmanager
def floor_stages(stack: Stack) -> Iterator[dict[str, int]]:
    """Both floor stages as processes (logs in ``<state_dir>/logs/floor-<stage>.log``): ``{name: pid}`` inside.

    Raises:
        RuntimeError: a stage did not become ready (its log says why).
    """
    connection = json.dumps({"servers": stack.nats_servers, "options": admin_options(stack)})
    env = {**stack.env, "EFFECTGATE_BENCH_NATS": connection, "EFFECTGATE_BENCH_REDIS_URL": stack.redis_url}
    started: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for role, stage in (("first", FIRST), ("second", SECOND)):
            started[stage.durable] = _ready(_start_stage(stack, role, env))
        yield {name: process.pid for name, process in started.items()}
    finally:
        for process in started.values():
            end(process, 10.0)


def _start_stage(stack: Stack, role: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    log = stack.state_dir / "logs" / f"floor-{role}.log"
    with log.open("ab") as sink:
        argv = [sys.executable, "-m", "effectgate.cli.bench.floor_stage", role]
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=sink, **owned())


def _ready(process: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
    """``process`` once it wrote ``ready``; stopped and an error if it did not within :data:`READY_TIMEOUT_S`."""
    assert process.stdout is not None
    readable, _, _ = select.select([process.stdout], [], [], READY_TIMEOUT_S)
    if readable and process.stdout.readline().strip() == b"ready":
        return process
    end(process, 0.0, signal.SIGKILL)
    raise RuntimeError(f"a transport floor stage did not start (see its log; exit code {process.returncode})")
