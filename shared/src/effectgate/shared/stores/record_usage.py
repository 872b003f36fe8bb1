"""How full the record stream is, against its byte limit and the deployment's high-water mark.

A request stored is owed a decision and a receipt, written to the same stream after it. Above
the high-water mark (:attr:`effectgate.shared.config.bus.BusLayout.store_high_water`) the policy
denies new requests ``store_full`` (one small decision and receipt each), so the room left holds
what the requests admitted before still have to write. The usage is read from the server's
stream info (its ``max_bytes`` is the truth, whatever a setting says) and kept for
:data:`FRESH_S` seconds; it is reported in ``/readyz``, as ``effectgate_record_store_used_ratio``
and, on crossing the mark, as a ``store_nearly_full`` security event (an alarm through audit).
See ``docs/explanation/replication-and-limits.md``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import nats.errors
from nats.js import JetStreamContext

from effectgate.contracts.bus import catalog
from effectgate.contracts.security import SecurityKind
from effectgate.shared.runtime.metrics import RECORD_STORE_USED
from effectgate.shared.runtime.reporting import SecurityReporter

__all__ = ["FRESH_S", "STALE_S", "WRITES_PER_REQUEST", "RecordUsage", "StoreUsage"]

log = logging.getLogger("effectgate.record_usage")

FRESH_S = 1.0
"""A reading younger than this is used as it is, seconds; older, the stream info is read again."""

WRITES_PER_REQUEST = 4
"""Bytes a request adds to the record, as a multiple of its own size: it, its decision (which holds it),
a copy for approval, its receipt."""

STALE_S = 10.0
"""A reading older than this (none newer could be read) no longer says there is room, seconds."""


@dataclass(frozen=True)
class StoreUsage:
    """One reading of the record stream.

    Attributes:
        used_bytes: bytes stored now.
        max_bytes: its byte limit; ``None``: unlimited.
    """

    used_bytes: int
    max_bytes: int | None

    @property
    def ratio(self) -> float:
        """Share of the limit used (``0.0`` when unlimited)."""
        return self.used_bytes / self.max_bytes if self.max_bytes else 0.0


class RecordUsage:
    """The record stream's usage, read when stale, compared with the high-water mark.

    Args:
        js: a JetStream context allowed ``STREAM.INFO`` of the record stream.
        high_water: share of the byte limit above which the store is nearly full (0..1).
        reporter: reports the crossing as a security event (``None``: only logged).
        clock: monotonic seconds (injected for tests).
    """

    def __init__(
        self,
        js: JetStreamContext,
        high_water: float,
        reporter: SecurityReporter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._js, self._high_water, self._reporter, self._clock = js, high_water, reporter, clock
        self._last: StoreUsage | None = None
        self._read_at = -STALE_S
        self._above = False
        self._since_bytes = 0

    async def read(self, fresh: bool = False) -> StoreUsage | None:
        """The usage, read again when older than :data:`FRESH_S` (or ``fresh``); ``None``: never read, or stale."""
        if fresh or self._clock() - self._read_at >= FRESH_S:
            try:
                state = await self._js.stream_info(catalog.STREAM)
            except (nats.errors.Error, OSError) as error:
                log.warning("record stream usage not read: %s", error)
            else:
                limit = state.config.max_bytes
                self._last = StoreUsage(int(state.state.bytes), limit if limit and limit > 0 else None)
                self._read_at, self._since_bytes = self._clock(), 0
                self._seen(self._last)
        return self._last if self._clock() - self._read_at < STALE_S else None

    async def full(self, size_bytes: int = 0) -> str | None:
        """Why a new request of ``size_bytes`` may not be admitted now (nearly full, or usage unknown); ``None``: room.

        Between two readings the requests admitted are counted at :data:`WRITES_PER_REQUEST` times
        their size (the request, its decision holding it, its receipt): when that estimate reaches
        the mark the stream is read again at once, so a burst cannot overshoot a cached reading.
        """
        usage = await self.read()
        if usage is not None and self._nearly_full(self._estimate(usage, size_bytes)):
            usage = await self.read(fresh=True)
        if usage is None:
            return "the record store's usage cannot be read: new requests are refused until it can"
        if reason := self._nearly_full(usage):
            return reason
        self._since_bytes += WRITES_PER_REQUEST * size_bytes
        return None

    def _estimate(self, usage: StoreUsage, size_bytes: int) -> StoreUsage:
        return StoreUsage(usage.used_bytes + self._since_bytes + WRITES_PER_REQUEST * size_bytes, usage.max_bytes)

    def ready(self) -> str | None:
        """Readiness check: ``None`` while the last reading is under the high-water mark."""
        return None if self._last is None else self._nearly_full(self._last)

    async def probe(self) -> None:
        """Sampler probe: read the usage (the gauge and the crossing report follow)."""
        await self.read()

    def _nearly_full(self, usage: StoreUsage) -> str | None:
        if usage.max_bytes is None or usage.ratio < self._high_water:
            return None
        mark = f"{self._high_water:.0%}"
        return f"the record store is nearly full ({usage.used_bytes} of {usage.max_bytes} bytes, over {mark})"

    def _seen(self, usage: StoreUsage) -> None:
        RECORD_STORE_USED.replace({(): usage.ratio} if usage.max_bytes else {})
        above = self._nearly_full(usage)
        if above and not self._above:
            log.error("%s: new requests are denied store_full", above)
            if self._reporter is not None:
                self._reporter.report(SecurityKind.STORE_NEARLY_FULL, reason_code="store_full", detail=above)
        self._above = above is not None
