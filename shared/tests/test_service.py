"""A service answers requests only on inboxes, never on a subject the requester names."""

from __future__ import annotations

import asyncio
import json

import nats.errors
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
        reply = await _asked(nc, f"ask.{ns}")  # the service is serving
        for _ in range(10):
            await nc.publish(f"ask.{ns}", b"{}", reply=f"squat.{ns}")
        await _asked(nc, f"ask.{ns}")  # answered after the ten above: they were handled
        await asyncio.sleep(0.2)
    finally:
        await broker.stop()
    assert reply.data == b"the answer" and squatted == []


async def _asked(nc: Client, subject: str) -> Msg:
    """A request answered, asked again until the subscription is in place (at most 5 s)."""
    for _ in range(50):
        try:
            return await nc.request(subject, b"{}", timeout=0.5)
        except nats.errors.NoRespondersError:
            await asyncio.sleep(0.1)
    raise TimeoutError(f"nobody answers on {subject}")


@pytest.mark.parametrize("size", [1024, 2 * 1024 * 1024])
async def test_an_answer_nats_cannot_carry_is_a_refusal_not_silence(
    nats_url: str, nc: Client, ns: str, size: int
) -> None:
    router = NatsRouter()

    @rpc(router, f"big.{ns}", "q")
    async def answer(msg: NatsMessage) -> bytes:
        return json.dumps({"ok": True, "reason_code": "found", "reason": "x", "pad": "y" * size}).encode()

    broker = NatsBroker(nats_url)
    broker.include_router(router)
    await broker.start()
    try:
        reply = json.loads((await _asked(nc, f"big.{ns}")).data)
    finally:
        await broker.stop()
    if size < nc.max_payload:
        assert reply["ok"] is True and len(reply["pad"]) == size
    else:
        assert (reply["ok"], reply["reason_code"]) == (False, "reply_too_large")
        assert f"NATS carries at most {nc.max_payload}" in reply["reason"]
