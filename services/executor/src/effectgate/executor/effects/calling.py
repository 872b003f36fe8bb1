"""What a tool host is given with a call, and what it may give back besides the result.

:func:`call_context` builds the :class:`~effectgate.contracts.tools.hosting.CallContext` a call
runs under from the record only: the signed decision, the verified grant, the executor's clock
and the current span (never the request body). :class:`Effected` is a result that names the
target system's own id for its effect; the runner puts it on the receipt (``target_effect_id``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from effectgate.contracts.events import ApprovalGranted, DecisionMade
from effectgate.contracts.tools.hosting import CallContext
from effectgate.shared.runtime.tracing import carried

__all__ = ["Effected", "call_context"]


@dataclass(frozen=True)
class Effected:
    """A tool's result with the target's id for what it did.

    Attributes:
        result: the operation's result (checked against its output schema like any other).
        target_effect_id: the target system's id (a payment id, a commit sha).
    """

    result: Any
    target_effect_id: str


def call_context(decision: DecisionMade, grant: ApprovalGranted | None, now: datetime, timeout_s: float) -> CallContext:
    """The context of ``decision``'s call starting ``now`` under ``timeout_s`` seconds.

    ``approvers`` are the grant's (its single ``approver`` when it lists none); ``traceparent`` /
    ``tracestate`` are the current span's W3C Trace Context, ``None`` while tracing is off.
    """
    trace = carried({})
    approvers = (grant.approvers or (grant.approver,)) if grant is not None else ()
    return CallContext(
        principal=decision.principal,
        request_id=decision.request_id,
        idempotency_key=decision.idempotency_key or "",
        deadline=now + timedelta(seconds=timeout_s),
        approval_id=grant.approval_id if grant is not None else None,
        approvers=approvers,
        policy_version=decision.policy_version,
        traceparent=trace.get("traceparent"),
        tracestate=trace.get("tracestate"),
    )
