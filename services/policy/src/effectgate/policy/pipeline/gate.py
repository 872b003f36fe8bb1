"""The replay lookup and the rate admission of one decision, asked of the store together."""

from __future__ import annotations

from effectgate.policy.ports import AdmitAsk, RateLimiter, ReplayIndex, ReplayState, Screened

__all__ = ["SequentialGate", "wants_admission"]


def wants_admission(state: ReplayState | None, request_hash: str, ask: AdmitAsk) -> bool:
    """Whether a call whose key holds ``state`` takes a call of its rate (the module's rules)."""
    if state is None:
        return ask.fresh
    if state.fingerprint != request_hash:
        return False  # idempotency_key_reused: refused, nothing taken
    return ask.replay if state.done else ask.fresh


class SequentialGate:
    """:class:`~effectgate.policy.ports.ReplayGate` over a replay index and a rate limiter, one after the other."""

    def __init__(self, replays: ReplayIndex, limiter: RateLimiter) -> None:
        self._replays, self._limiter = replays, limiter

    async def screen(self, principal: str, idempotency_key: str, request_hash: str, ask: AdmitAsk) -> Screened:
        """See :meth:`~effectgate.policy.ports.ReplayGate.screen`."""
        state = await self._replays.lookup(principal, idempotency_key)
        if not wants_admission(state, request_hash, ask):
            return Screened(state, None)
        return Screened(state, await self._limiter.admit(principal, ask.bucket, ask.rate, ask.request_id))
