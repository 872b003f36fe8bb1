"""An agent's first connection: a few quiet attempts with backoff, then one error naming the URL.

nats-py retries a first connection as often as it retries a lost one (``max_reconnect_attempts``,
``reconnect_time_wait``) and reports every failed attempt to the error callback: by default 30
attempts over 30 s and 30 log lines. An agent that starts before the gateway wants a short,
quiet wait instead, and a connection that, once made, reconnects as long as the caller asked.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client

from effectgate.contracts.bus.nats_credentials import connect_arguments, load_credentials, redact, rotated
from effectgate.contracts.bus.nats_permissions import agent_user
from effectgate.contracts.errors import described
from effectgate.sdk.errors import BusUnreachable

__all__ = ["AGENT_DEFAULTS", "RETRY_DELAYS_S", "connect_agent", "connect_quietly"]

log = logging.getLogger("effectgate.sdk")

RETRY_DELAYS_S = (0.25, 0.5, 1.0, 1.5, 2.0)
"""Seconds between attempts: six attempts within about 5 s of waiting."""

AGENT_DEFAULTS: dict[str, Any] = {"connect_timeout": 2.0, "max_reconnect_attempts": 30, "reconnect_time_wait": 1.0}
"""An agent's ``nats.connect`` options unless it gives its own: 2 s per attempt; once connected,
a lost connection retried 30 times one second apart."""

ErrorCallback = Callable[[Exception], Awaitable[None]]
_ONE_ATTEMPT = {"allow_reconnect": False, "max_reconnect_attempts": 1, "reconnect_time_wait": 0.2}
_RECONNECT = tuple(_ONE_ATTEMPT)


def _relay(caller: ErrorCallback) -> tuple[ErrorCallback, Callable[[], None]]:
    """The error callback nats-py holds (silent until connected, then ``caller``), and what marks it connected."""
    connected = False

    async def relay(error: Exception) -> None:
        if connected:
            await caller(error)

    def now_connected() -> None:
        nonlocal connected
        connected = True

    return relay, now_connected


def _refused(error: BaseException) -> bool:
    return "authorization violation" in str(error).lower()


async def connect_quietly(url: str, error_cb: ErrorCallback, **options: Any) -> Client:
    """Connect to ``url`` in at most ``1 + len(RETRY_DELAYS_S)`` attempts, reporting nothing until connected.

    Args:
        url: the NATS server, or a comma-separated list of the cluster's servers.
        error_cb: hears the connection's errors once it is connected.
        options: ``nats.connect`` options; their reconnect settings apply once connected.

    Raises:
        PermissionError: the server refused the credentials (at once: retrying never helps).
        BusUnreachable: no attempt connected (the message names the URL, credentials hidden,
            and the last reason).
    """
    (relay, now_connected), last = _relay(error_cb), ""
    kept = {name: options.pop(name) for name in _RECONNECT if name in options}
    for attempt, delay in enumerate((0.0, *RETRY_DELAYS_S)):
        await asyncio.sleep(delay)
        nc, last = await _attempt(url, relay, options, attempt)
        if nc is not None:
            nc.options.update({"allow_reconnect": True, **kept})
            now_connected()
            return nc
    tried = f"{1 + len(RETRY_DELAYS_S)} attempts over {sum(RETRY_DELAYS_S):g} s"
    raise BusUnreachable(redact(f"cannot reach NATS at {url} ({tried}): {last}"))


async def _attempt(
    url: str, relay: ErrorCallback, options: dict[str, Any], attempt: int = 0
) -> tuple[Client | None, str]:
    """One attempt: the connection and ``""``, or ``None`` and why not.

    Attempt ``n`` tries the servers of ``url`` from the ``n``-th on (in order, round): nats-py
    goes on to the next server when one refuses the connection, but not when one accepts it and
    never answers (a frozen node), so each attempt starts at another. Credentials written in
    ``url`` are sent as options, to every server (``connect_arguments``).

    Raises:
        PermissionError: the server refused the credentials.
    """
    servers, options = connect_arguments(url, options)
    servers = rotated(servers, attempt)
    try:
        return await nats.connect(servers, error_cb=relay, dont_randomize=True, **_ONE_ATTEMPT, **options), ""
    except (TimeoutError, OSError, nats.errors.Error) as error:
        if _refused(error):
            raise PermissionError(redact(f"NATS at {url} refused the credentials: {described(error)}")) from None
        return None, described(error)


async def connect_agent(url: str, principal: str, credentials: str | Path | None, **options: Any) -> Client:
    """``principal``'s agent connection to ``url``: its credentials file's options, then ``options``, then the defaults.

    Each failure once connected is logged as one warning line (unless ``options`` name an ``error_cb``).

    Raises:
        effectgate.contracts.bus.nats_credentials.CredentialsInvalid: the file cannot be used.
        ValueError: the file's user is not ``agent-<principal>``.
        PermissionError / BusUnreachable: as :func:`connect_quietly`.
    """
    if credentials is not None:
        options = {**_agent_credentials(credentials, principal), **options}
    settings = {**AGENT_DEFAULTS, **options}
    return await connect_quietly(url, settings.pop("error_cb", _log_error), **settings)


async def _log_error(error: Exception) -> None:
    log.warning("NATS connection: %s", error or type(error).__name__)


def _agent_credentials(path: str | Path, principal: str) -> dict[str, str]:
    """The file's ``nats.connect`` options, if they are the credentials of ``principal``'s agent user.

    Raises:
        CredentialsInvalid: as :func:`load_credentials`.
        ValueError: the file's user is not ``agent-<principal>``.
    """
    options = load_credentials(path)
    if options["user"] != agent_user(principal):
        raise ValueError(f"{path} holds the credentials of {options['user']}, not of {agent_user(principal)}")
    return options
