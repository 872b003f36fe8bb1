"""Ports of the policy service, each with an in-memory twin.

- :class:`DescriptorSource`: tool descriptors by ``(tool, version)`` (the registry's KV bucket);
- :class:`ToolStates`: each tool's state as the registry recorded it (the same bucket);
- :class:`ReplayIndex`: the executor's idempotency records, read to recognise a replay;
- :class:`RateLimiter`: per-principal call rates, consumed when a call is *admitted* to run;
- :class:`PolicyStore`: the policy in force and every published version (the policy KV
  bucket, :class:`toolgate.shared.policy_kv.PolicyBucket`).

A call is admitted once: at its decision when it executes directly (replays included),
at the re-check before the effect when it runs on an approval. A call the policy denies
or sends to approval consumes nothing at its decision. Admission is keyed by request id,
so a redelivered request or a repeated re-check never consumes twice.

Rate limits follow GCRA, the generic cell rate algorithm (ITU-T I.371; see brandur.org
"Rate limiting, cells, and GCRA"): ``calls`` per ``period_s``, emission interval
``period_s / calls``, burst ``calls``. :class:`InMemoryRateLimiter` and
``adapters.redis_limiter.RedisRateLimiter`` implement the same arithmetic, in integer
microseconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from toolgate.contracts.descriptors import RateLimit, ToolDescriptor, semver_key
from toolgate.contracts.tool_states import ToolState
from toolgate.shared.policy_kv import CurrentEntry, PolicyConflict, PublishedPolicy

__all__ = [
    "DescriptorSource",
    "InMemoryDescriptorSource",
    "InMemoryPolicyStore",
    "InMemoryRateLimiter",
    "InMemoryReplayIndex",
    "LimitDecision",
    "PolicyStore",
    "RateLimiter",
    "ReplayIndex",
    "ReplayState",
    "ToolStates",
    "admitted_key",
    "gcra_parameters",
    "limiter_key",
    "no_calls",
    "retry_after_s",
]


class DescriptorSource(Protocol):
    """Reads published tool descriptors."""

    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        """Return ``tool`` at ``version`` (``None``: the latest version), or None when unknown."""
        ...

    async def list(self) -> list[ToolDescriptor]:
        """Return the latest version of every tool, sorted by name."""
        ...


class ToolStates(Protocol):
    """Reads the tools' recorded states (:mod:`toolgate.contracts.tool_states`)."""

    async def state(self, tool: str) -> ToolState | None:
        """Return the recorded state of ``tool``, or None when none was recorded."""
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
    """The rate limiter's answer for one admission.

    Attributes:
        allowed: the call fits in the rate and was counted (or its request was admitted
            before and is not counted again).
        remaining: calls still allowed right now after this one (0 when limited).
        retry_after_s: seconds until one call fits again, rounded up to the millisecond
            (0.0 when allowed).
    """

    allowed: bool
    remaining: int
    retry_after_s: float


class RateLimiter(Protocol):
    """Counts admitted calls per ``(principal, bucket)`` (bucket: ``descriptors.rate_of``)."""

    async def admit(self, principal: str, bucket: str, rate: RateLimit, request_id: str) -> LimitDecision:
        """Admit request ``request_id`` of ``principal`` if one more call fits ``rate``.

        Exactly once per ``(principal, request_id)``: a request admitted before is
        allowed again without being counted; a limited one leaves nothing behind.

        Raises:
            LimiterUnavailable: the limiter's store failed or timed out; the caller
                denies the request (fail closed).
        """
        ...


def limiter_key(principal: str, bucket: str) -> str:
    """Return ``tg:rl:{<principal>}:<bucket>`` (hash tag: one Redis Cluster slot per principal)."""
    return f"tg:rl:{{{principal}}}:{bucket}"


def admitted_key(principal: str, request_id: str) -> str:
    """Return ``tg:rl:{<principal>}:admitted:<request_id>``, the marker of an admitted request.

    Buckets hold no ``:`` after the tag (tool names and ``<tool>.<operation>`` with a tool
    name first), so a marker never meets a bucket.
    """
    return f"tg:rl:{{{principal}}}:admitted:{request_id}"


def gcra_parameters(rate: RateLimit) -> tuple[int, int] | None:
    """Return ``(emission_interval_us, burst)`` for ``rate``, or None when it allows no calls."""
    if rate.calls < 1 or rate.period_s <= 0:
        return None
    return max(1, round(rate.period_s * 1_000_000 / rate.calls)), rate.calls


def retry_after_s(wait_us: int) -> float:
    """``wait_us`` microseconds as seconds, rounded up to the millisecond."""
    return math.ceil(wait_us / 1000) / 1000


def no_calls(rate: RateLimit) -> LimitDecision:
    """The decision for a rate that allows no calls at all (``calls < 1`` or ``period_s <= 0``)."""
    return LimitDecision(allowed=False, remaining=0, retry_after_s=max(rate.period_s, 0.0))


class InMemoryRateLimiter:
    """GCRA in process memory, for tests and single-process use.

    Args:
        clock: monotonic clock in seconds (default :func:`time.monotonic`).
        admitted_ttl_s: how long an admitted request id is remembered, seconds.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, admitted_ttl_s: float = 3600.0) -> None:
        self._clock, self._admitted_ttl_us = clock, round(admitted_ttl_s * 1_000_000)
        self._tat_us: dict[str, int] = {}
        self._admitted_until_us: dict[str, int] = {}

    async def admit(self, principal: str, bucket: str, rate: RateLimit, request_id: str) -> LimitDecision:
        """See :meth:`RateLimiter.admit`; never raises."""
        parameters = gcra_parameters(rate)
        if parameters is None:
            return no_calls(rate)
        emission_us, burst = parameters
        key, now_us = limiter_key(principal, bucket), round(self._clock() * 1_000_000)
        tolerance_us, tat_us = emission_us * burst, max(self._tat_us.get(key, now_us), now_us)
        if self._admitted_until_us.get(admitted_key(principal, request_id), 0) > now_us:
            return LimitDecision(True, max(0, (tolerance_us - (tat_us - now_us)) // emission_us), 0.0)
        new_tat_us = tat_us + emission_us
        if new_tat_us - tolerance_us > now_us:
            return LimitDecision(False, 0, retry_after_s(new_tat_us - tolerance_us - now_us))
        self._tat_us[key] = new_tat_us
        self._admitted_until_us[admitted_key(principal, request_id)] = now_us + self._admitted_ttl_us
        return LimitDecision(True, (tolerance_us - (new_tat_us - now_us)) // emission_us, 0.0)


class PolicyStore(Protocol):
    """The policy in force (``current``), every published version, and the seeded file's version.

    Every method may raise ``nats.errors.Error`` (the bucket cannot be reached).
    """

    async def current(self) -> CurrentEntry:
        """The policy in force and its revision."""
        ...

    async def version(self, version: str) -> PublishedPolicy | None:
        """A published version, or ``None``."""
        ...

    async def file_version(self) -> str | None:
        """The version of the policy file last seeded, or ``None``."""
        ...

    async def replace_current(self, policy: PublishedPolicy, revision: int | None) -> int:
        """Put ``policy`` in force if ``current`` is still at ``revision``; return the new revision.

        Raises:
            PolicyConflict: ``current`` moved since it was read.
        """
        ...

    async def mark_file(self, version: str) -> None:
        """Record that the policy file of ``version`` was seeded."""
        ...


class InMemoryPolicyStore:
    """:class:`PolicyStore` in process memory (revisions count up from 1)."""

    def __init__(self) -> None:
        self.entry = CurrentEntry(None, None)
        self.versions: dict[str, PublishedPolicy] = {}
        self.file: str | None = None
        self._revision = 0

    async def current(self) -> CurrentEntry:
        """See :meth:`PolicyStore.current`."""
        return self.entry

    async def version(self, version: str) -> PublishedPolicy | None:
        """See :meth:`PolicyStore.version`."""
        return self.versions.get(version)

    async def file_version(self) -> str | None:
        """See :meth:`PolicyStore.file_version`."""
        return self.file

    async def replace_current(self, policy: PublishedPolicy, revision: int | None) -> int:
        """See :meth:`PolicyStore.replace_current`."""
        self.versions.setdefault(policy.version, policy)
        if revision != self.entry.revision:
            raise PolicyConflict(f"current is at revision {self.entry.revision}, not {revision}")
        self._revision += 1
        self.entry = CurrentEntry(policy, self._revision)
        return self._revision

    async def mark_file(self, version: str) -> None:
        """See :meth:`PolicyStore.mark_file`."""
        self.file = version
