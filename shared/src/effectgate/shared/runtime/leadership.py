"""One holder per deployment of a named lease: work that must run once, however many replicas run.

A lease is a key of :data:`~effectgate.contracts.bus.catalog.LEASES_BUCKET`, a NATS KV bucket
whose TTL is :data:`~effectgate.contracts.bus.catalog.LEASE_TTL_S`. A replica takes it with
``create`` (refused while the key exists) and renews it every third of the TTL with an
``update`` checked against the revision it last wrote (refused once anybody else wrote it);
a holder that dies stops renewing, the server drops the key when the TTL has passed, and a
standby's next ``create`` takes it. A holder counts itself the holder only for two thirds
of the TTL after it *sent* its last successful renewal (monotonic clock, which keeps counting
while the process is stopped), so it stops before the key can expire and another replica take
it; a holder paused longer finds out on waking, before it acts.

The revision at which a lease was taken is its fencing token: it grows with every new holder.
Work whose store outlives a holder (the audit chain) records the token with what it writes and
refuses a smaller one, so an old holder that acts on a stale belief still writes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable

import nats.errors
from nats.js import JetStreamContext
from nats.js.errors import KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from effectgate.contracts.bus.catalog import LEASE_TTL_S, LEASES_BUCKET

__all__ = ["Leadership", "bind"]

log = logging.getLogger("effectgate")


class Leadership:
    """Takes, renews and gives up one lease (module doc).

    Args:
        kv: the leases bucket.
        name: the lease (:class:`~effectgate.contracts.bus.catalog.Leases`).
        holder: this replica's id (written as the key's value; for people reading the bucket).
        ttl_s: the bucket's TTL, seconds.
        clock: monotonic seconds.

    Attributes:
        token: the fencing token (the revision the lease was taken at) while held, else ``None``.
    """

    def __init__(
        self,
        kv: KeyValue,
        name: str,
        holder: str,
        ttl_s: float = LEASE_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kv, self.name, self.holder, self._clock = kv, name, holder, clock
        self.renew_every_s, self._valid_s = ttl_s / 3, ttl_s * 2 / 3
        self.token: int | None = None
        self._revision: int | None = None
        self._renewed_at = -float("inf")

    def held(self) -> bool:
        """Whether this replica may act as the holder now (its last renewal is recent enough)."""
        return self.token is not None and self._clock() - self._renewed_at < self._valid_s

    async def step(self) -> bool:
        """Take the lease, or renew it when held; return whether it is held afterwards.

        A refusal (another holder) drops it; a bus fault keeps it only until its validity runs out.
        """
        sent, value = self._clock(), self.holder.encode()
        try:
            if self._revision is None:
                revision = self.token = await self._kv.create(self.name, value)
            else:  # refused if anybody wrote the key since: then another replica holds it
                revision = await self._kv.update(self.name, value, last=self._revision)
        except KeyWrongLastSequenceError:
            self._drop()
            return False
        except (nats.errors.Error, OSError) as error:
            log.warning("lease %s: could not be renewed (%s)", self.name, type(error).__name__)
            return self.held()
        self._revision, self._renewed_at = revision, sent
        return True

    async def run(self, on_change: Callable[[bool], Awaitable[None]] | None = None) -> None:
        """Take or renew the lease every :attr:`renew_every_s` until cancelled; ``on_change(held)`` when it changes."""
        was = False
        while True:
            now = await self.step()
            if now != was:
                self._changed(now)
                if on_change is not None:
                    await _handled(on_change, now, self.name)
            was = now
            await asyncio.sleep(self.renew_every_s)

    def _changed(self, held: bool) -> None:
        log.info("lease %s: %s by %s (token %s)", self.name, "taken" if held else "lost", self.holder, self.token)

    def _drop(self) -> None:
        self.token, self._revision, self._renewed_at = None, None, -float("inf")


async def bind(js: JetStreamContext, name: str, service: str) -> Leadership:
    """The lease ``name`` for this replica of ``service`` (holder ``<service>@<host>:<pid>:<nonce>``).

    Raises:
        nats.js.errors.BucketNotFoundError: the bucket was not provisioned (``ensure_bus``).
    """
    holder = f"{service}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    return Leadership(await js.key_value(LEASES_BUCKET), name, holder)


async def _handled(on_change: Callable[[bool], Awaitable[None]], held: bool, name: str) -> None:
    """Run ``on_change(held)``; a failure is logged (the lease is kept or lost by :meth:`Leadership.step` alone)."""
    try:
        await on_change(held)
    except Exception:
        log.exception("lease %s: the change could not be handled", name)
