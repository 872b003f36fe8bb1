"""Step 6 of the pipeline (:mod:`effectgate.policy.service`): the tool's state, the key's record, the rate.

The policy's verdict and the tool's recorded state are known first (both without the
idempotency store); then one :class:`~effectgate.policy.ports.ReplayGate` call reads the key's
record and takes the call's rate when it runs now.
"""

from __future__ import annotations

from datetime import datetime

from effectgate.contracts.errors import IndexLost
from effectgate.contracts.events import ToolRequested
from effectgate.contracts.tools.tool_states import blocks
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.domain import LimitDecision
from effectgate.policy.errors import LimiterUnavailable
from effectgate.policy.pipeline.intake import Ended
from effectgate.policy.ports import AdmitAsk, ReplayGate, ReplayState, ToolStates

__all__ = ["blocked_now", "screen"]

_REUSED = "idempotency key was used with another request (other arguments, or another tool version or descriptor)"


async def blocked_now(tool: str, states: ToolStates | None, now: datetime) -> Ended | None:
    """``tool_unavailable`` when the tool's recorded state blocks calls now (nothing would run), else ``None``.

    An unreadable state is ``registry_unavailable`` (fail closed), like an unreadable
    descriptor; ``states`` ``None``: not consulted. Returned, not raised: a replay ignores it.
    """
    if states is None:
        return None
    try:
        state = await states.state(tool)
    except Exception:  # an unreadable state denies (fail closed)
        return Ended(Verdict.DENY, "registry_unavailable", "the registry cannot be read: denied (fail closed)")
    if state is not None and blocks(state, now):
        return Ended(Verdict.DENY, "tool_unavailable", f"{tool} is {state.state}: {state.reason}")
    return None


async def screen(
    principal: str, request: ToolRequested, digest: str, ask: AdmitAsk, gate: ReplayGate, said: Verdict | None
) -> tuple[bool, LimitDecision | None]:
    """Whether the call is a replay, and the rate's answer when admission was asked.

    ``said``: the policy's verdict when it lets the call run (for a limiter fault's denial).

    Raises:
        IndexLost: transient, retried while the index is rebuilt from the stream.
        Ended: ``idempotency_store_unavailable``, ``rate_limiter_unavailable`` (fail
            closed) or ``idempotency_key_reused``.
    """
    try:
        screened = await gate.screen(principal, request.idempotency_key, digest, ask)
    except IndexLost:
        raise
    except LimiterUnavailable as error:  # only the limiter failed: the record was read
        raise Ended(Verdict.DENY, error.reason_code, error.reason, policy_verdict=said) from None
    except Exception:  # an unreadable store denies (fail closed)
        reason = "the idempotency store cannot be reached: denied (fail closed)"
        raise Ended(Verdict.DENY, "idempotency_store_unavailable", reason) from None
    return _replay(screened.state, digest), screened.limit


def _replay(state: ReplayState | None, digest: str) -> bool:
    if state is None:
        return False
    if state.fingerprint != digest:
        raise Ended(Verdict.REFUSE, "idempotency_key_reused", _REUSED)
    return state.done
