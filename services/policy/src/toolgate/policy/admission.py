"""Admission: the moment a call's rate budget is consumed (once per request).

A call is admitted when it is allowed to run: at its decision when it executes directly
(a replay included), at the re-check before the effect when it runs on an approval
(``RecheckQuery.admit_request_id``). A call sent to approval consumes nothing while it
waits, and a rejected or expired approval has nothing to give back. The budget is the
operation's own rate, else the tool's (:func:`toolgate.shared.descriptors.rate_of`).
"""

from __future__ import annotations

from dataclasses import dataclass

from toolgate.policy.errors import PolicyError
from toolgate.policy.ports import RateLimiter
from toolgate.shared.descriptors import ToolDescriptor, rate_of

__all__ = ["NotAdmitted", "admit"]


@dataclass(frozen=True, slots=True)
class NotAdmitted:
    """Why a call was not admitted.

    Attributes:
        reason_code: ``rate_limited`` or ``rate_limiter_unavailable`` (fail closed).
        reason: human text naming the budget and when to retry.
        retry_after_s: for ``rate_limited``, seconds until the call would fit.
    """

    reason_code: str
    reason: str
    retry_after_s: float | None = None


async def admit(
    principal: str, descriptor: ToolDescriptor, operation: str, request_id: str, limiter: RateLimiter
) -> NotAdmitted | None:
    """Consume one call of the budget ``operation`` uses, unless ``request_id`` was admitted before.

    Returns:
        ``None`` when admitted, else why not; never raises for a limiter fault (that is
        a :class:`NotAdmitted` ``rate_limiter_unavailable``: fail closed).
    """
    bucket, rate = rate_of(descriptor, operation)
    try:
        decision = await limiter.admit(principal, bucket, rate, request_id)
    except PolicyError as error:
        return NotAdmitted(error.reason_code, error.reason)
    if decision.allowed:
        return None
    budget = f"{rate.calls} calls per {rate.period_s:g}s"
    reason = f"rate limit of {bucket} reached ({budget}); retry after {decision.retry_after_s:.3f}s"
    return NotAdmitted("rate_limited", reason, decision.retry_after_s)
