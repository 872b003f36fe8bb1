"""Pure rules of the policy service: call rates by GCRA, and where a rate lives in Redis.

Rate limits follow GCRA, the generic cell rate algorithm (ITU-T I.371; see brandur.org "Rate
limiting, cells, and GCRA"): ``calls`` per ``period_s``, emission interval ``period_s /
calls``, burst ``calls``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from effectgate.contracts.tools.descriptors import RateLimit

__all__ = ["LimitDecision", "admitted_key", "gcra_parameters", "limiter_key", "no_calls", "retry_after_s"]


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
