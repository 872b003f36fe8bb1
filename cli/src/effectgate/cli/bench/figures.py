"""Latency and throughput of one kind of call, and the ratios between two kinds (pure, except :func:`measure`)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

__all__ = ["Figures", "Ratios", "Scaling", "figures_of", "measure", "percentile", "ratios", "scaling", "warm_up"]

WARMUP_CALLS = 20
"""Calls made (one at a time, not measured) before each measured run."""


@dataclass(frozen=True)
class Figures:
    """One run of ``calls`` calls with ``concurrency`` in flight.

    Attributes:
        concurrency: calls in flight at once.
        calls: calls measured.
        p50_ms / p99_ms: latency percentiles of those calls, milliseconds.
        calls_per_s: calls completed per second of the run's wall time.
    """

    concurrency: int
    calls: int
    p50_ms: float
    p99_ms: float
    calls_per_s: float


@dataclass(frozen=True)
class Ratios:
    """The governed call against a cheaper call at the same concurrency.

    Attributes:
        p50: governed p50 / other p50.
        p99_over_p50: governed p99 / other p50 (the issue's target form: p99 against the other's median).
        throughput: governed calls/s / other calls/s (below 1: the governed call is slower).
    """

    p50: float
    p99_over_p50: float
    throughput: float


@dataclass(frozen=True)
class Scaling:
    """One run against the same call measured on a smaller system (same concurrency).

    Attributes:
        p50 / p99: this run's percentile / the smaller system's same percentile.
        throughput: this run's calls/s / the smaller system's (below 1: slower).
    """

    p50: float
    p99: float
    throughput: float


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` (0 ≤ ``q`` ≤ 100), linearly interpolated between order statistics.

    Raises:
        ValueError: ``values`` is empty or ``q`` is outside [0, 100].
    """
    if not values or not 0 <= q <= 100:
        raise ValueError(f"percentile {q} of {len(values)} values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def figures_of(latencies_ms: Sequence[float], wall_s: float, concurrency: int) -> Figures:
    """The figures of one run: its latencies (ms) and its wall time (seconds, > 0).

    Raises:
        ValueError: no latencies.
    """
    return Figures(
        concurrency=concurrency,
        calls=len(latencies_ms),
        p50_ms=percentile(latencies_ms, 50),
        p99_ms=percentile(latencies_ms, 99),
        calls_per_s=len(latencies_ms) / wall_s,
    )


def ratios(governed: Figures, other: Figures) -> Ratios:
    """``governed`` against ``other`` (same concurrency): see :class:`Ratios`."""
    return Ratios(
        p50=governed.p50_ms / other.p50_ms,
        p99_over_p50=governed.p99_ms / other.p50_ms,
        throughput=governed.calls_per_s / other.calls_per_s,
    )


def scaling(run: Figures, smallest: Figures) -> Scaling:
    """``run`` against ``smallest``, each figure against its own kind: see :class:`Scaling`."""
    return Scaling(
        p50=run.p50_ms / smallest.p50_ms,
        p99=run.p99_ms / smallest.p99_ms,
        throughput=run.calls_per_s / smallest.calls_per_s,
    )


async def warm_up(call: Callable[[], Awaitable[None]], calls: int = WARMUP_CALLS) -> None:
    """Make ``calls`` calls one at a time, unmeasured (connections, caches, consumers warm).

    Raises:
        whatever ``call`` raises.
    """
    for _ in range(calls):
        await call()


async def measure(call: Callable[[], Awaitable[None]], calls: int, concurrency: int) -> Figures:
    """Run ``calls`` calls with at most ``concurrency`` in flight, timing each.

    Raises:
        whatever ``call`` raises (the run stops at the first failure).
    """
    gate, latencies_ms = asyncio.Semaphore(concurrency), []

    async def timed() -> None:
        async with gate:
            started = time.perf_counter()
            await call()
            latencies_ms.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(timed() for _ in range(calls)))
    return figures_of(latencies_ms, time.perf_counter() - started, concurrency)
