"""What a worker's answer, or its silence, means for the call (pure).

========================  =========================================================
``ok``                    the result; with ``effect_id``, an :class:`Effected`
``refused``               ``ToolRefused(reason_code)``: nothing ran, never retried
``failed``                ``ToolFailed(reason_code)``; ``retryable``: a :class:`Transient`
``uncertain``             ``ToolOutcomeUnknown(reason_code)``
no responders             ``ToolRefused("tool_unavailable")`` (no worker: nothing ran), transient
no answer in time         ``ToolFailed`` for ``READ_ONLY``, ``ToolOutcomeUnknown`` for a write
an unreadable answer, or  as no answer in time (logged)
one for another call
========================  =========================================================
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from effectgate.contracts.events import decode_untrusted
from effectgate.contracts.tools.hosting import WorkerAnswer
from effectgate.contracts.vocabulary import SideEffectClass
from effectgate.executor.adapters.python.retries import Transient
from effectgate.executor.domain import clipped
from effectgate.executor.effects.calling import Effected
from effectgate.executor.errors import ExecutorError, ToolFailed, ToolOutcomeUnknown, ToolRefused

__all__ = ["answered", "decoded", "no_answer", "no_worker"]

log = logging.getLogger("effectgate.executor")

_answers = msgspec.json.Decoder(WorkerAnswer)
_CODE_CHARS = 64
"""Longest reason code taken from a worker."""


def decoded(data: bytes, call_id: str, where: str) -> WorkerAnswer | None:
    """The answer ``data`` holds to call ``call_id``; ``None`` (logged) for anything else."""
    try:
        answer = decode_untrusted(_answers, data)
    except msgspec.DecodeError as error:
        log.warning("%s: the answer is no WorkerAnswer: %s", where, clipped(str(error)))
        return None
    if answer.call_id != call_id:
        log.warning("%s: an answer for call %r came to call %r", where, answer.call_id[:64], call_id)
        return None
    return answer


def answered(answer: WorkerAnswer, where: str) -> Any:
    """The call's result, from the worker's ``answer`` (module table).

    Raises:
        ToolRefused / ToolFailed / ToolOutcomeUnknown: the answer says so.
        Transient: ``failed`` and ``retryable``.
    """
    if answer.outcome == "ok":
        return answer.result if answer.effect_id is None else Effected(answer.result, answer.effect_id)
    code = answer.reason_code[:_CODE_CHARS] if answer.reason_code != "ok" else answer.outcome
    reason = clipped(f"{where}: {answer.reason or code.replace('_', ' ')}")
    if answer.outcome == "refused":
        raise ToolRefused(code, reason)
    if answer.outcome == "uncertain":
        raise ToolOutcomeUnknown(code, reason)
    if answer.retryable:
        raise Transient(code, ToolFailed(code, reason))
    raise ToolFailed(code, reason)


def no_worker(where: str) -> Transient:
    """No worker took the call: nothing ran."""
    return Transient("tool_unavailable", ToolRefused("tool_unavailable", f"{where}: no worker is serving it"))


def no_answer(side_effect: SideEffectClass, code: str, reason: str) -> Transient:
    """The call was sent and no answer to it came: a read failed; a write's effect is unknown."""
    error: ExecutorError
    if side_effect is SideEffectClass.READ_ONLY:
        error = ToolFailed(code, reason)
    else:
        error = ToolOutcomeUnknown(code, reason + "; its effect is unknown")
    return Transient(code, error, unknown=True)
