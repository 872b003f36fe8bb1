"""A service answers requests only on inboxes, never on a subject the requester names."""

from __future__ import annotations

import asyncio
import json
import logging

import nats.errors
import pytest
from faststream import FastStream
from faststream.nats import NatsBroker, NatsMessage, NatsRouter
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from effectgate.shared.config.settings import ServiceSettings
from effectgate.shared.runtime.assembly import (
    Lifecycle,
    NotStarted,
    RuntimeCell,
    is_inbox,
    new_app,
    new_broker,
    rpc,
    run_service,
)

pytestmark = pytest.mark.connected


def test_what_counts_as_an_inbox() -> None:
    assert is_inbox("_INBOX.abc.1") and is_inbox("_INBOX_agent-a.x") and is_inbox("_R_.abc.def")
    refused = ["$KV.EFFECTGATE_TOOLS.latest.x", "tg.decision.a.b", "_INBOXES.x", "INBOX.x", "_R_x.y"]
    assert not any(map(is_inbox, refused))


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
    """A request answered (within 5 s), asked again until the subscription is in place (at most 50 tries)."""
    for _ in range(50):
        try:
            return await nc.request(subject, b"{}", timeout=5.0)
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


def _starting_forever(nats_url: str, ran: list[str]) -> FastStream:
    """A service whose build never ends, stopped (as by SIGTERM) while it builds; its closers note what ran."""
    broker = new_broker("executor", ServiceSettings(nats_url=nats_url))
    cell: RuntimeCell[str] = RuntimeCell()
    app: list[FastStream] = []

    async def build(js: JetStreamContext) -> None:
        asyncio.get_running_loop().call_later(0.3, app[0].exit)  # what FastStream's SIGTERM handler calls
        await asyncio.Event().wait()

    async def needs_the_runtime() -> None:
        ran.append(f"closed {cell()}")

    async def closes_its_own() -> None:
        ran.append("own closed")

    app.append(new_app(broker, build, Lifecycle(closers=[needs_the_runtime, closes_its_own])))
    return app[0]


def test_a_service_stopped_while_starting_stops_in_order_without_a_crash(
    nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []

    with caplog.at_level(logging.INFO):
        code = run_service("executor", lambda: _starting_forever(nats_url, ran))

    said = [(record.levelname, record.getMessage()) for record in caplog.records if record.name == "effectgate"]
    assert code == 0 and ran == ["own closed"], said
    assert ("INFO", "stopped before it finished starting") in said
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR], said


def test_a_runtime_read_before_it_is_built_says_so() -> None:
    with pytest.raises(NotStarted, match="service not started"):
        RuntimeCell[str]()()
    assert issubclass(NotStarted, RuntimeError)  # a handler reading it early is retried, as before
