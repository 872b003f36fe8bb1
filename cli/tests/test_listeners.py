"""The stack binds each port a service listens on itself, first, and hands the socket down."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from effectgate.cli.stack.listeners import Listeners

HEALTH = "EFFECTGATE_EXECUTOR_HTTP_PORT"
SLACK = "EFFECTGATE_CHATOPS_SLACK_PORT"


@pytest.fixture
def listeners() -> Iterator[Listeners]:
    made = Listeners()
    yield made
    made.close()


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield int(other.getsockname()[1])


def _listens(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


def test_a_service_is_handed_a_socket_already_listening_on_its_port(listeners: Listeners) -> None:
    settings, fds = listeners.handed("executor", "executor", {HEALTH: "0"})

    port = int(settings[HEALTH])
    assert port > 0 and _listens(port), "bound and listening before the service runs"
    assert fds == (int(settings["EFFECTGATE_EXECUTOR_HTTP_SOCKET_FD"]),)
    assert listeners.port("executor", HEALTH) == port


def test_a_restart_gets_the_same_socket_and_a_replica_one_of_its_own(listeners: Listeners) -> None:
    first, _ = listeners.handed("executor", "executor", {HEALTH: "0"})
    again, _ = listeners.handed("executor", "executor", {HEALTH: "0"})
    replica, _ = listeners.handed("executor", "executor-2", {HEALTH: first[HEALTH]})

    assert again == first
    assert replica[HEALTH] != first[HEALTH]


def test_a_taken_health_port_is_replaced_by_a_free_one(listeners: Listeners, taken: int) -> None:
    settings, _ = listeners.handed("executor", "executor", {HEALTH: str(taken)})

    assert int(settings[HEALTH]) != taken and _listens(int(settings[HEALTH]))


def test_a_taken_slack_endpoint_port_fails_naming_it(listeners: Listeners, taken: int) -> None:
    with pytest.raises(OSError, match=rf"chatops: 127\.0\.0\.1:{taken} \({SLACK}\)"):
        listeners.handed("chatops", "chatops", {SLACK: str(taken)})


def test_a_service_asked_for_no_port_is_handed_nothing(listeners: Listeners) -> None:
    assert listeners.handed("policy", "policy", {HEALTH: "0"}) == ({}, ())
