"""A server whose port is taken between its choice and its bind comes up on another one.

The test hook is the port chooser (:func:`effectgate.devstack.starting.free_port`): the first
port it hands out is occupied right away (by a listening socket, or by a real redis-server
that answers PING there), as another program on a busy machine would.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path

import nats
import pytest
import redis

from effectgate.devstack import starting
from effectgate.devstack.servers import ServerProcess, nats_server, redis_server

pytestmark = pytest.mark.connected  # starts nats-server and redis-server of its own


def _listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


@pytest.fixture
def occupied(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The chooser's first port is taken by a listening socket as soon as it is chosen; the ports so taken."""
    taken: list[int] = []
    with ExitStack() as held:
        real = starting.free_port

        def chosen_then_taken() -> int:
            port = real()
            if not taken:
                taken.append(held.enter_context(_listening_on(port)).getsockname()[1])
            return port

        monkeypatch.setattr(starting, "free_port", chosen_then_taken)
        yield taken


def _listening_on(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def _serves_nats(server: ServerProcess) -> bool:
    async def connect() -> bool:
        client = await nats.connect(server.url, allow_reconnect=False)
        await client.close()
        return True

    return asyncio.run(connect())


def _serves_redis(server: ServerProcess) -> bool:
    client = redis.Redis.from_url(server.url, socket_timeout=2)
    try:
        return int(client.info("server")["process_id"]) == server.process.pid
    finally:
        client.close()


SERVERS: dict[str, tuple[Callable[[Path], AbstractContextManager[ServerProcess]], Callable[[ServerProcess], bool]]] = {
    "nats": (nats_server, _serves_nats),
    "redis": (redis_server, _serves_redis),
}


@pytest.mark.parametrize("kind", sorted(SERVERS))
def test_a_port_taken_between_choice_and_bind_is_replaced(kind: str, occupied: list[int], tmp_path: Path) -> None:
    run, serves = SERVERS[kind]
    with run(tmp_path / kind) as server:
        assert occupied, "the chooser's first port was taken"
        assert occupied[0] not in server.ports.values() and serves(server)


def test_a_redis_answering_on_the_chosen_port_is_never_taken_for_the_one_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with redis_server(tmp_path / "other") as other:
        handed = iter([other.ports["redis"]])
        real = starting.free_port
        monkeypatch.setattr(starting, "free_port", lambda: next(handed, None) or real())

        with redis_server(tmp_path / "mine") as mine:
            assert mine.url != other.url and _serves_redis(mine)


def test_preferred_ports_that_are_taken_are_replaced_by_free_ones(tmp_path: Path) -> None:
    with _listening() as client, _listening() as monitoring, _listening() as redis_port:
        taken = {client.getsockname()[1], monitoring.getsockname()[1], redis_port.getsockname()[1]}
        ports = (client.getsockname()[1], monitoring.getsockname()[1])
        with (
            nats_server(tmp_path / "nats", ports=ports) as bus,
            redis_server(tmp_path / "redis", port=redis_port.getsockname()[1]) as store,
        ):
            assert not taken & {*bus.ports.values(), *store.ports.values()}
            assert _serves_nats(bus) and _serves_redis(store)
