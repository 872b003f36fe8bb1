"""The replay lookup and the rate admission of one decision, asked of the store together.

A decision reads the idempotency record of its key and, when the call runs now, takes a
call of its rate (:mod:`toolgate.policy.admission`). Both live in Redis, so
:class:`ReplayGate` asks them in one round trip (``adapters.redis_gate``); the store
itself decides, from the record it reads, whether the call is a replay and so whether
the rate is taken, with the same rules as the two steps it replaces:

- a key used with another request hash (``idempotency_key_reused``) takes nothing;
- a replay (record ``done`` with the same hash) takes a call of the rate when
  :attr:`AdmitAsk.replay` (the policy lets the call run, directly or with approval);
- any other call takes one when :attr:`AdmitAsk.fresh` (the policy said ``execute``
  and the tool's recorded state does not block it);
- a missing epoch marker (the index lost its state) takes nothing and raises
  :class:`~toolgate.policy.errors.IndexLost`.

:class:`SequentialGate` is the twin over a :class:`~toolgate.policy.ports.ReplayIndex`
and a :class:`~toolgate.policy.ports.RateLimiter` (two calls, the same answers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from toolgate.contracts.descriptors import RateLimit
from toolgate.policy.ports import LimitDecision, RateLimiter, ReplayIndex, ReplayState

__all__ = ["AdmitAsk", "ReplayGate", "Screened", "SequentialGate", "wants_admission"]


@dataclass(frozen=True, slots=True)
class AdmitAsk:
    """The rate admission a decision asks for with its replay lookup.

    Attributes:
        bucket / rate: the rate budget (``descriptors.rate_of``).
        request_id: the request admitted (once per request id).
        fresh: take a call of the rate if the call is not a replay.
        replay: take a call of the rate if the call is a replay.
    """

    bucket: str
    rate: RateLimit
    request_id: str
    fresh: bool
    replay: bool


@dataclass(frozen=True, slots=True)
class Screened:
    """What the store answered: the key's record and, when admission was asked, the rate's answer.

    Attributes:
        state: the idempotency record (``None``: the key was never used).
        limit: the rate's answer, ``None`` when no admission applied (:func:`wants_admission`).
    """

    state: ReplayState | None
    limit: LimitDecision | None


def wants_admission(state: ReplayState | None, request_hash: str, ask: AdmitAsk) -> bool:
    """Whether a call whose key holds ``state`` takes a call of its rate (the module's rules)."""
    if state is None:
        return ask.fresh
    if state.fingerprint != request_hash:
        return False  # idempotency_key_reused: refused, nothing taken
    return ask.replay if state.done else ask.fresh


class ReplayGate(Protocol):
    """Reads a key's idempotency record and takes the call's rate when it runs now (one round trip)."""

    async def screen(self, principal: str, idempotency_key: str, request_hash: str, ask: AdmitAsk) -> Screened:
        """The record of ``(principal, idempotency_key)`` and, per :func:`wants_admission`, the rate's answer.

        Raises:
            IndexLost: the index has no epoch marker (nothing was taken).
            PolicyError: ``idempotency_store_unavailable`` when the store cannot answer,
                ``rate_limiter_unavailable`` when only the limiter failed; the caller
                denies (fail closed).
        """
        ...


class SequentialGate:
    """:class:`ReplayGate` over a replay index and a rate limiter, asked one after the other."""

    def __init__(self, replays: ReplayIndex, limiter: RateLimiter) -> None:
        self._replays, self._limiter = replays, limiter

    async def screen(self, principal: str, idempotency_key: str, request_hash: str, ask: AdmitAsk) -> Screened:
        """See :meth:`ReplayGate.screen`."""
        state = await self._replays.lookup(principal, idempotency_key)
        if not wants_admission(state, request_hash, ask):
            return Screened(state, None)
        return Screened(state, await self._limiter.admit(principal, ask.bucket, ask.rate, ask.request_id))
