"""The durations of the executor workflow, seconds (each one an executor setting)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Timing"]


@dataclass(frozen=True)
class Timing:
    """Durations of the workflow, seconds.

    Attributes:
        idempotency_ttl_s: how long an idempotency record (and its receipt) is kept.
        stale_grace_s: past a tool's timeout, when an unfinished run counts as abandoned
            even though its executor still heart-beats.
        decision_max_age_s: a decision older than this runs nothing (``decision_expired``).
        recheck_after_s: a decision older than this is re-checked with the policy before it runs.
    """

    idempotency_ttl_s: float = 86_400.0
    stale_grace_s: float = 30.0
    decision_max_age_s: float = 3_600.0
    recheck_after_s: float = 5.0
