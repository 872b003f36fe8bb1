"""A service's NATS connection notices a server that stopped answering (SIGSTOP, a black-holed node).

A frozen or partitioned node keeps its TCP connections open: nothing is reset, so nats-py only
learns of it from unanswered PINGs. With nats-py's defaults (a PING every 120 s, two
outstanding) a service on that node stays "connected" and ``/readyz`` 200 for minutes while
it can publish, fetch and ack nothing, and never moves to the other nodes of the cluster.
This test fails while that is so: the watch must report the connection lost within
:data:`NOTICED_WITHIN_S`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from effectgate.devstack.servers import nats_server
from effectgate.sdk.connecting import connect_quietly
from effectgate.shared.config.settings import ServiceSettings
from effectgate.shared.runtime.broker import new_broker
from effectgate.shared.runtime.connections import connect_once

pytestmark = pytest.mark.connected

NOTICED_WITHIN_S = 20.0
"""Bound from the freeze until the service's readiness says it is not connected, seconds."""


async def _noticed(not_ready: Callable[[], str | None]) -> str | None:
    """What ``not_ready`` said once it said anything, or ``None`` after :data:`NOTICED_WITHIN_S`."""
    deadline = time.monotonic() + NOTICED_WITHIN_S
    for _ in range(int(NOTICED_WITHIN_S * 2)):
        if (said := not_ready()) is not None or time.monotonic() > deadline:
            return said
        await asyncio.sleep(0.5)
    return not_ready()


async def test_a_frozen_server_is_noticed_within_a_bounded_time(tmp_path: Path) -> None:
    with nats_server(tmp_path / "nats") as server:
        broker = new_broker("registry", ServiceSettings(nats_url=server.url))
        await broker.connect()
        broker.watch.follow(broker.connection)
        assert broker.watch.not_ready() is None
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            noticed = await _noticed(broker.watch.not_ready)
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
            await broker.stop()
        assert noticed is not None, f"still 'connected' {NOTICED_WITHIN_S:g} s after the server froze"


@pytest.fixture
def frozen_and_live(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two nats-servers, the first frozen (it accepts connections and never answers): their URLs."""
    with nats_server(tmp_path / "frozen") as frozen, nats_server(tmp_path / "live") as live:
        os.kill(frozen.process.pid, signal.SIGSTOP)
        try:
            yield frozen.url, live.url
        finally:
            os.kill(frozen.process.pid, signal.SIGCONT)


async def test_a_command_reaches_the_next_server_when_the_first_is_frozen(frozen_and_live: tuple[str, str]) -> None:
    frozen, live = frozen_and_live
    nc = await connect_once(f"{frozen},{live}", timeout_s=1.0)
    try:
        assert nc.connected_url is not None and nc.connected_url.geturl() == live
    finally:
        await nc.close()


async def test_an_agent_reaches_the_next_server_when_the_first_is_frozen(frozen_and_live: tuple[str, str]) -> None:
    frozen, live = frozen_and_live

    async def quiet(error: Exception) -> None:
        return None

    nc = await connect_quietly(f"{frozen},{live}", quiet, connect_timeout=1.0)
    try:
        assert nc.connected_url is not None and nc.connected_url.geturl() == live
    finally:
        await nc.close()
