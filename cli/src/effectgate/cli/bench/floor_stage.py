"""One stage of the transport floor, as its own process: ``python -m effectgate.cli.bench.floor_stage first|second``."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

import nats
from nats.aio.msg import Msg

from effectgate.contracts.bus.catalog import token_of
from effectgate.shared.consumer.pulling import Puller
from effectgate.shared.runtime.redis_clients import client_for_url

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

STREAM = "EFFECTGATE_BENCH"
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
    from_id = (msg.headers or {}).get("Nats-Msg-Id", "").rpartition("-")[2]
    call_id = from_id or token_of(SECOND.filter_subject, msg.subject) or ""
    for _ in range(2):
        await no_op(keys=[f"bench:floor:{call_id}"])
    subject = next_subject(stage, call_id)
    await js.publish(subject, msg.data, stream=STREAM, headers={"Nats-Msg-Id": f"{stage.durable}-{call_id}"})
    await msg.ack()


async def serve(stage: Stage, connection: dict[str, Any], redis_url: str) -> None:
    """Pull from ``stage``'s consumer and handle each message until the process ends.

    ``connection``: ``{"servers": [NATS URL, …], "options": {nats.connect options}}`` (every node of a cluster).

    Raises:
        nats.errors.Error / redis.exceptions.RedisError: the servers cannot be reached.
    """
    nc = await nats.connect(servers=connection["servers"], **connection["options"])
    js, no_op = nc.jetstream(), client_for_url(redis_url, timeout_s=2.0).register_script(NO_OP)
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
    connection = json.loads(os.environ["EFFECTGATE_BENCH_NATS"])
    asyncio.run(serve(STAGES[sys.argv[1]], connection, os.environ["EFFECTGATE_BENCH_REDIS_URL"]))


if __name__ == "__main__":
    main()
