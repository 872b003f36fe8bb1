"""The executor's answer to ``tg.records.get.<principal>`` for tests that run agents without one.

Agents read back their stored receipts, decisions and result chunks by asking the executor
(``docs/explanation/services/executor.md``, "Reading back an agent's records"). Tests of the SDK on a
real NATS that start no executor answer for it with the executor's own reading
(:func:`effectgate.shared.stores.records.record_answer`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from nats.aio.client import Client
from nats.aio.msg import Msg

from effectgate.contracts.bus.catalog import Rpc, token_of
from effectgate.shared.stores.records import record_answer

__all__ = ["records_answered"]


@asynccontextmanager
async def records_answered(nc: Client) -> AsyncIterator[None]:
    """Answer every records query on ``nc`` while open, reading its JetStream as the executor does."""
    js = nc.jetstream()

    async def answer(msg: Msg) -> None:
        principal = token_of(Rpc.RECORDS_GET, msg.subject) or ""
        reply = await record_answer(js, principal, msg.data, nc.max_payload)
        await nc.publish(msg.reply, reply.body, headers=reply.headers)

    subscription = await nc.subscribe(Rpc.RECORDS_GET, cb=answer)
    try:
        yield
    finally:
        await subscription.unsubscribe()
