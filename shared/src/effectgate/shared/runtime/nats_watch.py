"""What a service's NATS connection is doing, and when it is lost for good.

nats-py reconnects to any server of the list on its own; readiness reads the state kept
here. Two outcomes never heal on their own, and a service that waited on them would hang:
the connection closed (the server ended it, or nats-py gave up), and reconnects that
keep being refused on authorization (a wrong or revoked password; FastStream even ends
nats-py's reconnect loop at the first such refusal). Either makes :attr:`ConnectionWatch.lost`
fire, with one sentence in :attr:`ConnectionWatch.reason`; the service then stops and
exits non-zero, and its supervisor restarts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable

from nats.aio.client import Client

from effectgate.contracts.bus.nats_credentials import redact
from effectgate.contracts.errors import Problem

__all__ = ["REFUSALS", "ConnectionLost", "ConnectionWatch", "is_refusal", "until_lost"]

log = logging.getLogger("effectgate")

REFUSALS = (
    "authorization violation",
    "authentication expired",
    "authentication revoked",
    "authorization timeout",
)
"""Server ``-ERR`` texts that refuse the client's identity (NATS client protocol), lower case."""


class ConnectionLost(Problem):
    """The service's NATS connection is lost for good; the message says why."""


def is_refusal(error: Exception) -> bool:
    """Whether ``error`` is the server refusing the client's credentials."""
    text = str(error).lower()
    return type(error).__name__ == "AuthorizationError" or any(refusal in text for refusal in REFUSALS)


class ConnectionWatch:
    """Follows one connection through nats-py's callbacks (``disconnected_cb`` … ``closed_cb``).

    Args:
        service: the service's name, for the log line.
        refused_exit_s: seconds reconnects may stay refused on authorization before the
            connection counts as lost.
    """

    def __init__(self, service: str, refused_exit_s: float) -> None:
        self.service, self.refused_exit_s = service, refused_exit_s
        self.state = ""  # nothing reported yet: the first connection is told by the client itself
        self.last_error = ""
        self.reason = ""
        self.lost = asyncio.Event()
        self._stopping = False
        self._deadline: asyncio.TimerHandle | None = None
        self._client: Client | None = None

    def follow(self, client: Client) -> None:
        """Read ``client``'s last error when it closes (nats-py closes on a server's ``-ERR`` without reporting it)."""
        self._client = client

    def not_ready(self) -> str | None:
        """``None`` when connected or not yet reported on, else why not (for ``/readyz``)."""
        if self.state in ("", "connected"):
            return None
        why = f" (last error: {self.last_error})" if self.last_error else ""
        return f"not connected to NATS: {self.state}{why}"

    def stopping(self) -> None:
        """The service is stopping: the connection closing now is not a loss."""
        self._stopping = True
        self._cancel_deadline()

    async def on_error(self, error: Exception) -> None:
        """An error on the connection or an attempt; a refusal starts the bounded wait."""
        self.last_error = redact(str(error) or type(error).__name__)
        if is_refusal(error) and self._deadline is None and self.state == "reconnecting":
            log.warning("NATS refused this service's credentials: %s; exiting in %.0f s unless a server accepts them",
                        self.last_error, self.refused_exit_s)  # fmt: skip
            why = f"NATS refused this service's credentials for {self.refused_exit_s:g} s ({self.last_error})"
            self._deadline = asyncio.get_running_loop().call_later(self.refused_exit_s, self._lose, why)

    async def on_disconnected(self) -> None:
        """The connection dropped; nats-py is reconnecting."""
        if not self._stopping and self.state != "closed":
            self.state = "reconnecting"

    async def on_reconnected(self) -> None:
        """nats-py reconnected (to any server, as the same identity)."""
        self.state, self.last_error = "connected", ""
        self._cancel_deadline()

    async def on_closed(self) -> None:
        """The connection closed: lost, unless the service is stopping."""
        self.state = "closed"
        if self._client is not None and self._client.last_error is not None:
            self.last_error = redact(str(self._client.last_error) or type(self._client.last_error).__name__)
        if not self._stopping:
            self._lose(f"the NATS connection closed ({self.last_error or 'no reason given'})")

    def _lose(self, why: str) -> None:
        if self.lost.is_set() or self._stopping:
            return
        self.reason = f"{self.service}: {why}"
        self.lost.set()

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


async def until_lost(watch: ConnectionWatch, work: Awaitable[None]) -> None:
    """Await ``work`` until it ends, or until ``watch`` says the connection is lost for good.

    Raises:
        ConnectionLost: the connection was lost (``work`` is cancelled first).
    """
    working, losing = asyncio.ensure_future(work), asyncio.ensure_future(watch.lost.wait())
    await asyncio.wait({working, losing}, return_when=asyncio.FIRST_COMPLETED)
    losing.cancel()
    if not working.done():
        working.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await working
        raise ConnectionLost(watch.reason)
    working.result()
