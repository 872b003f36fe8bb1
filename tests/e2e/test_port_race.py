"""A stack whose chosen ports are taken before it binds them still comes up, beside another stack.

The test hook is ``running_stack``'s port chooser: it chooses as ``effectgate up`` does
(:func:`effectgate.cli.stack.ports.stable_ports`) and then, before anything binds, has every chosen
port taken: by listening sockets, or by a second stack already running on them (two checkouts
on one host: a real nats-server, redis-server and services answer there). Every port moves
(nats, its monitoring, redis, each service's health port), the stack serves on the new ones,
and they are what ``up`` prints and records.
"""

from __future__ import annotations

import contextlib
import json
import socket
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from effectgate.cli.stack.launch import SERVICES, running_stack
from effectgate.cli.stack.ports import DEFAULT_PORTS, Ports, stable_ports
from effectgate.cli.stack.system import Stack
from effectgate.devstack.starting import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def _env(base: Path) -> dict[str, str]:
    (base / "box").mkdir(parents=True, exist_ok=True)
    return {"EFFECTGATE_EXECUTOR_SANDBOX_ROOT": str(base / "box")}


def _listening(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def _chooser(state: Path, defaults: dict[str, int], then: Callable[[Ports], None]) -> Callable[[], Ports]:
    """``up``'s choice from ``defaults``, after which ``then`` runs (before anything is bound)."""

    def choose() -> Ports:
        ports = stable_ports(state, defaults)
        then(ports)
        return ports

    return choose


def _serves(stack: Stack) -> None:
    """Each service answers ``/livez`` on its port; NATS monitoring answers on its own."""
    assert stack.ports is not None
    for service in SERVICES:
        with urllib.request.urlopen(f"http://127.0.0.1:{stack.ports.chosen[service]}/livez", timeout=5) as answer:
            assert answer.status == 200, service
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.ports.chosen['nats-monitoring']}/healthz", timeout=5):
        pass


def _fresh_defaults() -> dict[str, int]:
    """Preferred ports free now, one per name (the well-known defaults may be another stack's on this machine)."""
    return {name: free_port() for name in DEFAULT_PORTS}


@pytest.fixture
def held() -> Iterator[contextlib.ExitStack]:
    with contextlib.ExitStack() as sockets:
        yield sockets


def test_ports_taken_between_their_choice_and_their_bind_are_replaced(
    tmp_path: Path, held: contextlib.ExitStack
) -> None:
    taken: set[int] = set()

    def occupy(ports: Ports) -> None:
        for port in ports.chosen.values():
            held.enter_context(_listening(port))
            taken.add(port)

    state = tmp_path / "state"
    with running_stack(state, _env(tmp_path), ports=_chooser(state, _fresh_defaults(), occupy)) as stack:
        assert stack.ports is not None
        chosen = stack.ports.chosen
        assert taken and not taken & {chosen[name] for name in ("nats", "nats-monitoring", "redis", *SERVICES)}
        assert len(stack.ports.moved) == len(("nats", "nats-monitoring", "redis", *SERVICES)), stack.ports.moved
        _serves(stack)
        assert json.loads((state / "ports.json").read_text()) == chosen


def test_two_stacks_on_the_same_preferred_ports_both_come_up(tmp_path: Path) -> None:
    defaults = _fresh_defaults()
    first_state, second_state = tmp_path / "first" / "state", tmp_path / "second" / "state"
    first = running_stack(first_state, _env(tmp_path / "first"), ports=_chooser(first_state, defaults, lambda _: None))
    with first as one:
        assert one.ports is not None
        already = dict(one.ports.chosen)  # what the second checkout chose too, a moment before the first bound it

        def same_choice() -> Ports:
            return Ports(dict(already))

        with running_stack(second_state, _env(tmp_path / "second"), ports=same_choice) as two:
            assert two.ports is not None
            assert not set(one.listening().values()) & set(two.listening().values())
            assert set(two.listening()) == {"nats", "nats-monitoring", "redis", *SERVICES}
            _serves(one)
            _serves(two)
