"""How a call's end becomes a :class:`WorkerAnswer` (``docs/reference/tools-api.md``, "Errors and receipts").

``Refusal`` and an unavailable secret: ``refused`` (nothing ran). ``Fault``: ``failed``, with its
``retryable``. A dependency that could not be provided: ``failed``, retryable (the tool did not
run). Anything else — an error, the deadline, a result the output schema refuses, a stream broken
part way — ``failed`` for a ``READ_ONLY`` operation and ``uncertain`` for a write, with no result.
"""

from __future__ import annotations

from typing import Any

from effectgate.contracts.errors import Problem, described
from effectgate.contracts.tools.hosting import WorkerAnswer, WorkerCall
from effectgate.tools.errors import Fault, Refusal
from effectgate.tools.reading import DeclaredOperation
from effectgate.tools.running import DependencyUnavailable, SecretUnavailable, StreamBroken

__all__ = ["OutputInvalid", "ended", "failure", "refused"]


class OutputInvalid(Problem):
    """The result is not JSON, or the output schema refuses it."""


def refused(call: WorkerCall, code: str, reason: str) -> WorkerAnswer:
    """A ``refused`` answer: nothing ran."""
    return WorkerAnswer(call_id=call.call_id, outcome="refused", reason_code=code, reason=reason)


def ended(call: WorkerCall, result: Any, effect_id: str | None) -> WorkerAnswer:
    """An ``ok`` answer."""
    return WorkerAnswer(call_id=call.call_id, outcome="ok", result=result, effect_id=effect_id)


def _unclear(call: WorkerCall, operation: DeclaredOperation, code: str, reason: str) -> WorkerAnswer:
    if operation.writes:
        return WorkerAnswer(call_id=call.call_id, outcome="uncertain", reason_code=code, reason=reason)
    return WorkerAnswer(call_id=call.call_id, outcome="failed", reason_code=code, reason=reason)


def failure(
    call: WorkerCall, operation: DeclaredOperation, error: Exception, timed_out_s: float | None
) -> WorkerAnswer:
    """The answer for a call that raised ``error`` (``timed_out_s``: the deadline it ran out of, seconds)."""
    if timed_out_s is not None:
        return _unclear(call, operation, "tool_timeout", f"no result within the call's deadline ({timed_out_s:g}s)")
    if isinstance(error, StreamBroken):
        return _broken(call, operation, error)
    if isinstance(error, Refusal | SecretUnavailable):
        return refused(call, error.reason_code, error.reason)
    if isinstance(error, Fault | DependencyUnavailable):
        retryable = error.retryable if isinstance(error, Fault) else True
        return WorkerAnswer(
            call_id=call.call_id,
            outcome="failed",
            reason_code=error.reason_code,
            reason=error.reason,
            retryable=retryable,
        )
    if isinstance(error, OutputInvalid):
        return _unclear(call, operation, "output_invalid", error.reason)
    return _unclear(call, operation, "tool_error", f"{type(error).__name__}: {described(error)}")


def _broken(call: WorkerCall, operation: DeclaredOperation, error: StreamBroken) -> WorkerAnswer:
    """A stream that failed: as its cause, but a refusal after items is no refusal (something ran)."""
    cause = error.cause
    if error.items == 0 and isinstance(cause, Exception) and not isinstance(cause, StreamBroken):
        return failure(call, operation, cause, None)
    if isinstance(cause, Fault) and not operation.writes:
        return failure(call, operation, cause, None)
    code = cause.reason_code if isinstance(cause, Refusal | Fault) else "tool_error"
    return _unclear(call, operation, code, f"{error.reason}: {type(cause).__name__}: {described(cause)}")
