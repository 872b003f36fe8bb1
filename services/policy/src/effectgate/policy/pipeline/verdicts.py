"""The decision a pipeline's end makes: the :class:`DecisionMade` event, its reasons bounded.

Every decision is addressed to the envelope's principal, names its request id and, when a
policy was in force, what it was built from (:func:`made_under`). A reason can quote what the
agent sent (a schema message repeating an argument's value), so reasons are cut at
:data:`MAX_REASON_CHARS`. Pure: no I/O.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from effectgate.contracts.events import DecisionMade
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.pipeline.intake import Ended, Envelope

__all__ = ["MAX_REASON_CHARS", "decision", "ended_decision", "fault_denial", "made_under"]

MAX_REASON_CHARS = 2_000
"""Longest reason a decision carries, characters. A reason can quote what the agent sent (a schema
message repeating an argument's value): cut here, a decision stays the size of its request plus a
bound, so it always fits the message its request fitted in."""

_REASONS = frozenset({"reason", "hidden_reason"})


def decision(env: Envelope, request_id: str, now: datetime, **fields: Any) -> DecisionMade:
    """The decision on ``request_id`` of ``env.principal`` made at ``now``, with ``fields`` (reasons bounded)."""
    event_id = f"decision:{env.principal}:{request_id}"
    bounded = {name: _bounded(value) if name in _REASONS else value for name, value in fields.items()}
    return DecisionMade(event_id=event_id, occurred_at=now, request_id=request_id, principal=env.principal, **bounded)


def _bounded(reason: Any) -> Any:
    """``reason`` within :data:`MAX_REASON_CHARS`, a cut one marked with its whole length."""
    if not isinstance(reason, str) or len(reason) <= MAX_REASON_CHARS:
        return reason
    return f"{reason[:MAX_REASON_CHARS]}… [reason cut at {MAX_REASON_CHARS} of {len(reason)} characters]"


def made_under(engine: PolicyEngine | None) -> dict[str, str | None]:
    """The decision's ``policy_version`` and ``entities_digest``: what ``engine`` was built from (``None``: none)."""
    if engine is None:
        return {"policy_version": None, "entities_digest": None}
    return {"policy_version": engine.version, "entities_digest": engine.entities_digest}


def fault_denial(env: Envelope, now: datetime, reason_code: str, reason: str) -> DecisionMade:
    """A ``deny`` decision for a request the service could not decide (fail closed).

    Carries only the envelope's principal and request id, so it can always be signed.
    """
    return decision(env, env.request_id, now, verdict=Verdict.DENY, reason_code=reason_code, reason=reason)


def ended_decision(
    env: Envelope, request_id: str, now: datetime, ended: Ended, key: str | None, under: dict[str, str | None]
) -> DecisionMade:
    """The decision of a request that ended at a step (:class:`Ended`); ``key``: its idempotency key, if read."""
    hidden = ended.hidden
    return decision(
        env,
        request_id,
        now,
        verdict=ended.verdict,
        reason_code=ended.reason_code,
        reason=ended.reason,
        idempotency_key=key,
        hidden_reason_code=hidden.reason_code if hidden else None,
        hidden_reason=hidden.reason if hidden else None,
        retry_after_s=ended.retry_after_s,
        policy_verdict=ended.policy_verdict,
        **under,
    )
