"""Gauges that need I/O are read in the background, every few seconds, never per call.

:class:`Sampler` runs each probe in turn every ``interval_s``; a probe reads what it measures
(JetStream consumer info, the approvals store) and stores it in a
:class:`~effectgate.shared.runtime.metrics.Sample` the gauge reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from nats.js import JetStreamContext

from effectgate.contracts.bus import catalog
from effectgate.contracts.errors import described
from effectgate.shared.runtime.metrics import CONSUMER_PENDING

__all__ = ["SAMPLE_INTERVAL_S", "Probe", "Sampler", "consumer_pending"]

log = logging.getLogger("effectgate")

SAMPLE_INTERVAL_S = 5.0
"""Seconds between two readings of the sampled gauges."""

Probe = Callable[[], Awaitable[None]]


class Sampler:
    """Runs probes every ``interval_s`` seconds until stopped.

    Args:
        probes: what to read, in order.
        interval_s: seconds between two rounds.
    """

    def __init__(self, probes: Sequence[Probe], interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self._probes, self._interval_s = probes, interval_s
        self._task: asyncio.Task[None] | None = None
        self._failing: set[Probe] = set()

    def start(self) -> None:
        """Start sampling in the background."""
        self._task = asyncio.create_task(self._loop(), name="sampler")

    async def stop(self) -> None:
        """Stop sampling."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            for probe in self._probes:
                await self._read(probe)
            await asyncio.sleep(self._interval_s)

    async def _read(self, probe: Probe) -> None:
        name = getattr(probe, "__name__", repr(probe))
        try:
            await probe()
        except Exception as error:  # a gauge is not worth a service: keep the last values
            if probe not in self._failing:
                reason = f"{type(error).__name__}: {described(error)}"
                log.warning("metrics probe %s failed (%s); its gauges keep their last values", name, reason)
            self._failing.add(probe)
            return
        if probe in self._failing:
            log.info("metrics probe %s reads again", name)
            self._failing.discard(probe)


def consumer_pending(js: JetStreamContext, durables: Sequence[str]) -> Probe:
    """A probe of ``effectgate_consumer_pending``: per durable, messages not delivered and not acknowledged.

    Raises (from the probe):
        nats.errors.Error: the consumer info could not be read.
    """

    async def read_consumer_pending() -> None:
        values: dict[tuple[tuple[str, str], ...], float] = {}
        for durable in durables:
            info = await js.consumer_info(catalog.STREAM, durable)
            values[(("durable", durable), ("state", "undelivered"))] = float(info.num_pending or 0)
            values[(("durable", durable), ("state", "unacknowledged"))] = float(info.num_ack_pending or 0)
        CONSUMER_PENDING.replace(values)

    return read_consumer_pending
