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

A worker's ``reason_code`` is taken only when it is a code (:data:`REASON_CODE`: snake_case, at
most 64 characters), else the outcome stands for it; an ``effect_id`` longer than
:data:`MAX_EFFECT_ID_CHARS` is no target id and is dropped (logged): the receipt must fit one
message whatever the worker sent.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Final

import msgspec

from effectgate.contracts.events import decode_untrusted
from effectgate.contracts.tools.hosting import WorkerAnswer
from effectgate.contracts.vocabulary import SideEffectClass
from effectgate.executor.adapters.python.retries import Transient
from effectgate.executor.domain import MAX_EFFECT_ID_CHARS, clipped
from effectgate.executor.effects.calling import Effected
from effectgate.executor.errors import ExecutorError, ToolFailed, ToolOutcomeUnknown, ToolRefused

__all__ = ["REASON_CODE", "answered", "decoded", "no_answer", "no_worker"]

log = logging.getLogger("effectgate.executor")

_answers = msgspec.json.Decoder(WorkerAnswer)
REASON_CODE: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")
"""A reason code a worker's answer may give the receipt (snake_case, at most 64 characters)."""


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
        return _ok(answer, where)
    code = answer.reason_code if REASON_CODE.fullmatch(answer.reason_code) else "ok"
    code = answer.outcome if code == "ok" else code
    reason = clipped(f"{where}: {answer.reason or code.replace('_', ' ')}")
    if answer.outcome == "refused":
        raise ToolRefused(code, reason)
    if answer.outcome == "uncertain":
        raise ToolOutcomeUnknown(code, reason)
    if answer.retryable:
        raise Transient(code, ToolFailed(code, reason))
    raise ToolFailed(code, reason)


def _ok(answer: WorkerAnswer, where: str) -> Any:
    """The result of an ``ok`` answer, an :class:`Effected` when it names a usable effect id."""
    if answer.effect_id is None:
        return answer.result
    if len(answer.effect_id) > MAX_EFFECT_ID_CHARS:
        log.warning("%s: an effect id of %d characters was dropped", where, len(answer.effect_id))
        return answer.result
    return Effected(answer.result, answer.effect_id)


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
