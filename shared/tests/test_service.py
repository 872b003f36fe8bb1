"""A service answers requests only on inboxes, never on a subject the requester names."""

from __future__ import annotations

import asyncio

import pytest
from faststream.nats import NatsBroker, NatsMessage, NatsRouter
from nats.aio.client import Client
from nats.aio.msg import Msg

from toolgate.shared.service import is_inbox, rpc

pytestmark = pytest.mark.connected


def test_what_counts_as_an_inbox() -> None:
    assert is_inbox("_INBOX.abc.1") and is_inbox("_INBOX_agent-a.x")
    assert not any(map(is_inbox, ["$KV.TOOLGATE_TOOLS.latest.x", "tg.decision.a.b", "_INBOXES.x", "INBOX.x"]))


async def test_an_answer_goes_to_an_inbox_and_never_to_a_chosen_subject(nats_url: str, nc: Client, ns: str) -> None:
    router = NatsRouter()

    @rpc(router, f"ask.{ns}", "q")
    async def answer(msg: NatsMessage) -> bytes:
        return b"the answer"

    broker = NatsBroker(nats_url)
    broker.include_router(router)
    await broker.start()
    try:
        squatted: list[bytes] = []

        async def spy(msg: Msg) -> None:
            squatted.append(msg.data)

        await nc.subscribe(f"squat.{ns}", cb=spy)
        await nc.publish(f"ask.{ns}", b"{}", reply=f"squat.{ns}")
        reply = await nc.request(f"ask.{ns}", b"{}", timeout=5)
        await asyncio.sleep(0.3)
    finally:
        await broker.stop()
    assert reply.data == b"the answer" and squatted == []
