"""Workers' announcements become Python tools' states: ready; unavailable when gone, stopping or off-digest."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import msgspec
import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ToolStateChanged
from effectgate.contracts.tools.descriptors import ToolDescriptor, descriptor_digest
from effectgate.contracts.tools.hosting import ServedTool, WorkerAlive, WorkerSubjects
from effectgate.executor.adapters.python.liveness import WorkerLiveness

from .conftest import bank

pytestmark = pytest.mark.connected

TTL_S = 0.8


class Published:
    def __init__(self, *descriptors: ToolDescriptor) -> None:
        self.descriptors = list(descriptors)

    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        return next((d for d in self.descriptors if d.name == tool), None)

    async def list(self) -> list[ToolDescriptor]:
        return list(self.descriptors)


class States:
    """The states announced on one tool's subject, in order."""

    def __init__(self) -> None:
        self.seen: asyncio.Queue[ToolStateChanged] = asyncio.Queue()

    async def next(self, timeout_s: float = 3.0) -> ToolStateChanged:
        return await asyncio.wait_for(self.seen.get(), timeout_s)


@pytest_asyncio.fixture
async def states(nc: Client, js: JetStreamContext, worker: str) -> AsyncIterator[States]:
    """The announced states of ``bank(worker)`` while a liveness watch runs over it."""
    found = States()

    async def heard(msg: object) -> None:
        found.seen.put_nowait(msgspec.json.decode(msg.data, type=ToolStateChanged))  # type: ignore[attr-defined]

    subscription = await nc.subscribe(Subjects.tool_state(bank(worker).name), cb=heard)
    liveness = WorkerLiveness(ttl_s=TTL_S, sweep_s=0.1, grace_s=0.0)
    await liveness.start(nc, js, Published(bank(worker)))
    yield found
    await liveness.stop()
    await subscription.unsubscribe()


async def announce(nc: Client, worker: str, digest: str, instance: str = "i1", stopping: bool = False) -> None:
    served = (ServedTool(tool=bank(worker).name, version="1.0.0", digest=digest),)
    alive = WorkerAlive(worker=worker, instance=instance, tools=served, at=datetime.now(UTC), stopping=stopping)
    await nc.publish(WorkerSubjects.alive(worker), msgspec.json.encode(alive))


async def test_a_tool_is_ready_while_served_and_unavailable_once_its_worker_falls_silent(
    nc: Client, states: States, worker: str
) -> None:
    first = await states.next()
    assert (first.state.state, first.server) == ("unavailable", worker) and worker in first.state.reason
    await announce(nc, worker, descriptor_digest(bank(worker)))
    ready = await states.next()
    assert ready.state.state == "ready" and ready.tool == bank(worker).name
    gone = await states.next(TTL_S * 4)  # no more announcements: it lapses after its TTL
    assert gone.state.state == "unavailable" and f"worker {worker}" in gone.state.reason


async def test_a_worker_declaring_another_digest_makes_its_tool_unavailable(
    nc: Client, states: States, worker: str
) -> None:
    published = descriptor_digest(bank(worker))
    assert (await states.next()).state.reason == f"no live instance of worker {worker} serves {bank(worker).name}"
    await announce(nc, worker, "sha256:" + "e" * 64)
    changed = await states.next()
    assert changed.state.state == "unavailable"
    said = f"worker {worker} declares {bank(worker).name} 1.0.0 sha256:{'e' * 64}, published 1.0.0 {published}"
    assert said in changed.state.reason
    await announce(nc, worker, published)  # the instance now serves what the operator published
    assert (await states.next()).state.state == "ready"


async def test_an_instance_announcing_it_stops_is_gone_at_once(nc: Client, states: States, worker: str) -> None:
    await states.next()
    await announce(nc, worker, descriptor_digest(bank(worker)))
    assert (await states.next()).state.state == "ready"
    await announce(nc, worker, descriptor_digest(bank(worker)), stopping=True)
    stopped = await states.next(TTL_S / 2)  # well before the announcement would lapse
    assert stopped.state.state == "unavailable"


async def test_stopping_after_the_connection_closed_raises_nothing(nats_url: str, worker: str) -> None:
    """Shutdown closes the broker before the closers run: the watch's stop must not end the executor in error."""
    import nats

    own = await nats.connect(nats_url)
    liveness = WorkerLiveness(ttl_s=TTL_S, sweep_s=0.1, grace_s=0.0)
    await liveness.start(own, own.jetstream(), Published(bank(worker)))
    await own.close()
    await liveness.stop()
