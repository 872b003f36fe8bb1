"""The standing pull request: messages as they are stored, never more than asked, one request per batch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

from effectgate.shared.consumer.pulling import Puller

pytestmark = pytest.mark.connected


class Pulled:
    """A stream of its own, one durable consumer, a puller, and the pull requests it made."""

    def __init__(self, nc: Client, js: JetStreamContext, ns: str) -> None:
        self.nc, self.js, self.ns, self.stream = nc, js, ns, f"P{ns}"
        self.puller = Puller(nc, self.stream, "c")
        self.requests: list[Msg] = []
        self._seen = asyncio.Condition()

    async def start(self) -> None:
        await self.js.add_stream(StreamConfig(name=self.stream, subjects=[f"{self.ns}.>"]))
        await self.js.add_consumer(self.stream, ConsumerConfig(durable_name="c", ack_policy=AckPolicy.EXPLICIT))

        async def seen(msg: Msg) -> None:
            async with self._seen:
                self.requests.append(msg)
                self._seen.notify_all()

        await self.nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.c", cb=seen)
        await self.puller.start()

    async def send(self, body: bytes) -> None:
        await self.js.publish(f"{self.ns}.m", body, stream=self.stream)

    async def made(self, count: int) -> None:
        """Return once the spy on the request subject has seen ``count`` pull requests."""
        async with self._seen:
            await self._seen.wait_for(lambda: len(self.requests) >= count)

    async def ack_pending(self) -> int:
        return int((await self.js.consumer_info(self.stream, "c")).num_ack_pending)


@pytest_asyncio.fixture
async def pulled(nc: Client, js: JetStreamContext, ns: str) -> AsyncIterator[Pulled]:
    made = Pulled(nc, js, ns)
    await made.start()
    yield made
    await made.puller.stop()
    await js.delete_stream(made.stream)


async def test_one_request_delivers_each_message_as_it_is_stored(pulled: Pulled) -> None:
    got: list[bytes] = []
    async with asyncio.timeout(20):  # a request that waited for its batch to fill would wait 60 s
        for index in range(6):
            fetching = asyncio.create_task(pulled.puller.fetch(8, wait_s=60.0))
            await asyncio.sleep(0.05)
            await pulled.send(b"m%d" % index)
            got += [msg.data for msg in await fetching]
    await pulled.nc.flush()
    assert got == [b"m%d" % index for index in range(6)]
    assert len(pulled.requests) == 1  # not one request per message


async def test_no_more_messages_are_delivered_than_were_asked_for(pulled: Pulled) -> None:
    for index in range(10):
        await pulled.send(b"m%d" % index)
    first = await pulled.puller.fetch(3, wait_s=5.0)
    await asyncio.sleep(0.3)
    assert [msg.data for msg in first] == [b"m0", b"m1", b"m2"]
    assert await pulled.ack_pending() == 3
    for msg in first:
        await msg.ack()
    second = await pulled.puller.fetch(3, wait_s=5.0)
    assert [msg.data for msg in second] == [b"m3", b"m4", b"m5"]


async def test_an_expired_request_is_followed_by_a_new_one(pulled: Pulled) -> None:
    assert await pulled.puller.fetch(4, wait_s=0.3) == []
    await asyncio.sleep(0.6)  # the server's request timeout has arrived: the request is over
    await pulled.send(b"late")
    found: list[Msg] = []
    async with asyncio.timeout(10):
        while not found:
            found = await pulled.puller.fetch(4, wait_s=2.0)
    assert [msg.data for msg in found] == [b"late"]
    async with asyncio.timeout(5):  # the spy on the request subject sees the second request after its answer
        await pulled.made(2)
    assert len(pulled.requests) == 2


async def test_a_status_on_another_inbox_subject_is_not_a_message(pulled: Pulled) -> None:
    fetching = asyncio.create_task(pulled.puller.fetch(2, wait_s=5.0))
    await asyncio.sleep(0.1)
    inbox = pulled.requests[0].reply.rsplit(".", 1)[0]  # a stranger aiming at the puller's inbox
    await pulled.nc.publish(f"{inbox}.999", b"", headers={"Status": "404"})
    await pulled.send(b"real")
    async with asyncio.timeout(10):
        assert [msg.data for msg in await fetching] == [b"real"]
