"""Ports of the policy service, each with an in-memory twin.

- :class:`DescriptorSource`: tool descriptors by ``(tool, version)`` (the registry's KV bucket);
- :class:`ReplayIndex`: the executor's idempotency records, read to recognise a replay;
- :class:`RateLimiter`: per-principal, per-tool call rates.

The rate limiter is consulted only for requests the policy would execute or send to
approval: a denied request never consumes a call of the agent's rate. The caller
(the request handler) guarantees that order by deciding first and acquiring second.

Rate limits follow GCRA, the generic cell rate algorithm (ITU-T I.371; see brandur.org
"Rate limiting, cells, and GCRA"): ``calls`` per ``period_s``, emission interval
``period_s / calls``, burst ``calls``. :class:`InMemoryRateLimiter` and
``adapters.redis_limiter.RedisRateLimiter`` implement the same arithmetic, in integer
microseconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from toolgate.shared.descriptors import RateLimit, ToolDescriptor, semver_key

__all__ = [
    "DescriptorSource",
    "InMemoryDescriptorSource",
    "InMemoryRateLimiter",
    "InMemoryReplayIndex",
    "LimitDecision",
    "RateLimiter",
    "ReplayIndex",
    "ReplayState",
    "gcra_parameters",
    "limiter_key",
    "no_calls",
]


class DescriptorSource(Protocol):
    """Reads published tool descriptors."""

    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        """Return ``tool`` at ``version`` (``None``: the latest version), or None when unknown."""
        ...

    async def list(self) -> list[ToolDescriptor]:
        """Return the latest version of every tool, sorted by name."""
        ...


class InMemoryDescriptorSource:
    """:class:`DescriptorSource` over a fixed list; "latest" is the highest SemVer."""

    def __init__(self, descriptors: list[ToolDescriptor]) -> None:
        self._descriptors = {(d.name, d.version): d for d in descriptors}

    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        """Return ``tool`` at ``version`` (``None``: latest), or None."""
        if version is not None:
            return self._descriptors.get((tool, version))
        versions = [d for (name, _), d in self._descriptors.items() if name == tool]
        return max(versions, key=lambda d: semver_key(d.version), default=None)

    async def list(self) -> list[ToolDescriptor]:
        """Return the latest version of every tool, sorted by name."""
        latest = [await self.get(name) for name in sorted({name for name, _ in self._descriptors})]
        return [d for d in latest if d is not None]


@dataclass(frozen=True, slots=True)
class ReplayState:
    """What the idempotency store holds for one ``(principal, idempotency key)``.

    Attributes:
        done: a receipt was stored (the call completed); False while in flight.
        fingerprint: the request hash (``sha256:<hex>``) the key was first used with.
    """

    done: bool
    fingerprint: str


class ReplayIndex(Protocol):
    """Reads the executor's idempotency records (never writes them)."""

    async def lookup(self, principal: str, idempotency_key: str) -> ReplayState | None:
        """Return the key's state, or None when the key was never used.

        Raises:
            PolicyError: the store cannot answer; the caller denies (fail closed).
        """
        ...


class InMemoryReplayIndex:
    """:class:`ReplayIndex` over a mapping ``(principal, idempotency_key) -> ReplayState``."""

    def __init__(self, states: Mapping[tuple[str, str], ReplayState] | None = None) -> None:
        self.states: dict[tuple[str, str], ReplayState] = dict(states or {})

    async def lookup(self, principal: str, idempotency_key: str) -> ReplayState | None:
        """Return the key's state, or None."""
        return self.states.get((principal, idempotency_key))


@dataclass(frozen=True, slots=True)
class LimitDecision:
    """The rate limiter's answer for one call.

    Attributes:
        allowed: the call fits in the rate and was counted.
        remaining: calls still allowed right now after this one (0 when limited).
        retry_after_s: seconds until one call fits again (0.0 when allowed).
    """

    allowed: bool
    remaining: int
    retry_after_s: float


class RateLimiter(Protocol):
    """Counts calls per ``(principal, tool)`` against the tool descriptor's rate."""

    async def acquire(self, principal: str, tool: str, rate: RateLimit) -> LimitDecision:
        """Count one call of ``tool`` by ``principal`` if it fits ``rate``.

        Raises:
            LimiterUnavailable: the limiter's store failed or timed out; the caller
                denies the request (fail closed).
        """
        ...


def limiter_key(principal: str, tool: str) -> str:
    """Return ``tg:rl:{<principal>}:<tool>`` (hash tag: one Redis Cluster slot per principal)."""
    return f"tg:rl:{{{principal}}}:{tool}"


def gcra_parameters(rate: RateLimit) -> tuple[int, int] | None:
    """Return ``(emission_interval_us, burst)`` for ``rate``, or None when it allows no calls."""
    if rate.calls < 1 or rate.period_s <= 0:
        return None
    return max(1, round(rate.period_s * 1_000_000 / rate.calls)), rate.calls


def no_calls(rate: RateLimit) -> LimitDecision:
    """The decision for a rate that allows no calls at all (``calls < 1`` or ``period_s <= 0``)."""
    return LimitDecision(allowed=False, remaining=0, retry_after_s=max(rate.period_s, 0.0))


class InMemoryRateLimiter:
    """GCRA in process memory, for tests and single-process use.

    Args:
        clock: monotonic clock in seconds (default :func:`time.monotonic`).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tat_us: dict[str, int] = {}

    async def acquire(self, principal: str, tool: str, rate: RateLimit) -> LimitDecision:
        """Count one call if it fits ``rate`` (see :meth:`RateLimiter.acquire`); never raises."""
        parameters = gcra_parameters(rate)
        if parameters is None:
            return no_calls(rate)
        emission_us, burst = parameters
        key, now_us = limiter_key(principal, tool), round(self._clock() * 1_000_000)
        tolerance_us = emission_us * burst
        new_tat_us = max(self._tat_us.get(key, now_us), now_us) + emission_us
        if new_tat_us - tolerance_us > now_us:
            return LimitDecision(allowed=False, remaining=0, retry_after_s=(new_tat_us - tolerance_us - now_us) / 1e6)
        self._tat_us[key] = new_tat_us
        return LimitDecision(
            allowed=True, remaining=(tolerance_us - (new_tat_us - now_us)) // emission_us, retry_after_s=0.0
        )
