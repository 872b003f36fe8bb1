"""One stage of the transport floor, as its own process: ``python -m toolgate.cli.bench.floor_stage first|second``.

A stage does what a service on the governed path does with a message, minus the work:
pull it from its durable consumer (the services' own :class:`~toolgate.shared.pulling.Puller`,
up to :data:`MAX_WORKERS` handled at once, as :class:`~toolgate.shared.handling.DurableWorker`),
make two Redis round trips (a no-op script), publish the next message into the stream
(JetStream publish, waiting for its acknowledgement) and acknowledge. ``first`` stands for
the policy service (replay lookup, rate-limit script; publishes the "decision"), ``second``
for the executor (claim, complete; publishes the "receipt" the client receives).

Environment: ``TOOLGATE_BENCH_NATS`` (JSON: ``{"url": …, "options": {nats.connect options}}``)
and ``TOOLGATE_BENCH_REDIS_URL``. Writes ``ready`` on stdout once it pulls; runs until
terminated (SIGTERM ends it at once: nothing it holds needs to survive).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

import nats
import redis.asyncio as aioredis
from nats.aio.msg import Msg

from toolgate.shared.pulling import Puller

__all__ = [
    "FIRST",
    "MAX_WORKERS",
    "REQUEST_SUBJECT",
    "SECOND",
    "STAGES",
    "STREAM",
    "Stage",
    "done_subject",
    "next_subject",
]

STREAM = "TOOLGATE_BENCH"
"""The floor's own stream (subjects ``bench.floor.>``), configured like the record stream."""

REQUEST_SUBJECT = "bench.floor.req"
MAX_WORKERS = 8
"""Messages handled at once per stage: the services' default (``Consumer.max_workers``)."""

NO_OP = "return 1"
"""The Redis script of every round trip: a round trip, no work."""


@dataclass(frozen=True)
class Stage:
    """One stage: the durable it pulls from, and where it publishes next.

    Attributes:
        durable: its consumer on :data:`STREAM`.
        filter_subject: what that consumer delivers.
        publishes: the prefix of the subject it publishes on (``<prefix>.<call id>``).
    """

    durable: str
    filter_subject: str
    publishes: str


FIRST = Stage("floor-first", REQUEST_SUBJECT, "bench.floor.mid")
SECOND = Stage("floor-second", "bench.floor.mid.*", "bench.floor.done")
STAGES = {"first": FIRST, "second": SECOND}


def next_subject(stage: Stage, call_id: str) -> str:
    """The subject ``stage`` publishes ``call_id``'s next message on."""
    return f"{stage.publishes}.{call_id}"


def done_subject(call_id: str = "*") -> str:
    """The subject the last stage publishes ``call_id``'s answer on (``*``: any call's)."""
    return next_subject(SECOND, call_id)


async def _handle(msg: Msg, stage: Stage, js: Any, no_op: Any) -> None:
    call_id = (msg.headers or {}).get("Nats-Msg-Id", "").rpartition("-")[2] or msg.subject.rpartition(".")[2]
    for _ in range(2):
        await no_op(keys=[f"bench:floor:{call_id}"])
    subject = next_subject(stage, call_id)
    await js.publish(subject, msg.data, stream=STREAM, headers={"Nats-Msg-Id": f"{stage.durable}-{call_id}"})
    await msg.ack()


async def serve(stage: Stage, connection: dict[str, Any], redis_url: str) -> None:
    """Pull from ``stage``'s consumer and handle each message until the process ends.

    Raises:
        nats.errors.Error / redis.exceptions.RedisError: the servers cannot be reached.
    """
    nc = await nats.connect(connection["url"], **connection["options"])
    js, no_op = nc.jetstream(), aioredis.Redis.from_url(redis_url).register_script(NO_OP)
    puller, inflight = Puller(nc, STREAM, stage.durable), set[asyncio.Task[None]]()
    await puller.start()
    print("ready", flush=True)
    while True:
        free = MAX_WORKERS - len(inflight)
        if free <= 0:
            await asyncio.wait(set(inflight), return_when=asyncio.FIRST_COMPLETED)
            continue
        for msg in await puller.fetch(free, wait_s=1.0):
            task = asyncio.create_task(_handle(msg, stage, js, no_op))
            inflight.add(task)
            task.add_done_callback(inflight.discard)


def main() -> None:
    """Entry point: the stage named by the first argument."""
    connection = json.loads(os.environ["TOOLGATE_BENCH_NATS"])
    asyncio.run(serve(STAGES[sys.argv[1]], connection, os.environ["TOOLGATE_BENCH_REDIS_URL"]))


if __name__ == "__main__":
    main()
