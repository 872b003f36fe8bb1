"""Checks of what an operation declares about how it is run: retries, reconcile, serialization, streaming, secrets.

Applied where a descriptor enters the system (the registry's publish). Each problem names its
field as ``operations.<op>.<field>: …`` (``secrets: …`` for the tool's secret names):

- ``retry`` only on a ``READ_ONLY`` operation or a write declared ``idempotent_at_target`` (a
  retry of any other write could do its effect twice), with 1 to :data:`MAX_ATTEMPTS` attempts
  and finite, non-negative backoffs;
- ``reconcile`` only on a write, naming a ``READ_ONLY`` operation of the same tool whose output
  schema accepts every :class:`~effectgate.contracts.tools.hosting.ReconcileAnswer`;
- ``serialize_by`` only with ``concurrency_safe=False``, a JSON Pointer into the input schema's
  properties (:func:`~effectgate.contracts.tools.pointers.pointer_problem`);
- ``streaming`` only with an array output schema;
- ``secrets`` names matching :data:`SECRET_NAME`.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

import msgspec

from effectgate.contracts.tools.descriptors import OperationSpec, RetryPolicy, ToolDescriptor
from effectgate.contracts.tools.hosting import ReconcileAnswer
from effectgate.contracts.tools.pointers import json_types, pointer_problem
from effectgate.contracts.tools.schemas import first_error
from effectgate.contracts.vocabulary import SideEffectClass

__all__ = ["MAX_ATTEMPTS", "SECRET_NAME", "operation_problem", "secrets_problem"]

MAX_ATTEMPTS: Final = 10
"""Most calls a retry policy may make in all."""

SECRET_NAME: Final = re.compile(r"^[A-Z][A-Z0-9_]{0,63}\Z")
"""What a secret's name may be: an environment variable's name in capitals."""

_ANSWERS: Final = tuple(
    msgspec.to_builtins(answer)
    for answer in (
        ReconcileAnswer(resolution="ran"),
        ReconcileAnswer(resolution="ran", effect_id="effect-1", note="found"),
        ReconcileAnswer(resolution="not_run"),
        ReconcileAnswer(resolution="unknown"),
    )
)
"""What a reconcile operation's output schema must accept."""


def secrets_problem(descriptor: ToolDescriptor) -> str | None:
    """What is wrong with the descriptor's ``secrets``, as ``"secrets: …"``; ``None``: nothing."""
    bad = [name for name in descriptor.secrets if not SECRET_NAME.match(name)]
    if bad:
        shown = ", ".join(repr(name[:64]) for name in bad[:5])
        return f"secrets: names must match {SECRET_NAME.pattern}; these do not: {shown}"
    return None


def operation_problem(descriptor: ToolDescriptor, name: str, spec: OperationSpec) -> tuple[str, str] | None:
    """The first problem of operation ``name`` (module doc); ``None``: none.

    Returns:
        ``("invalid_pointer", "operations.<name>.serialize_by: …")`` or
        ``("invalid_operation", "operations.<name>.<field>: …")`` (``retry``, ``reconcile``, ``streaming``).
    """
    if problem := _serialize_problem(spec):
        return "invalid_pointer", f"operations.{name}.{problem}"
    problem = _retry_problem(spec) or _streaming_problem(spec) or _reconcile_problem(descriptor, spec)
    return ("invalid_operation", f"operations.{name}.{problem}") if problem else None


def _retry_problem(spec: OperationSpec) -> str | None:
    if spec.retry is None:
        return None
    if spec.side_effect_class is not SideEffectClass.READ_ONLY and not spec.idempotent_at_target:
        return (
            "retry: a write is retried only when it is idempotent_at_target (its target refuses a"
            " duplicate); a retry of any other write could do its effect twice"
        )
    return _policy_problem(spec.retry)


def _policy_problem(policy: RetryPolicy) -> str | None:
    if isinstance(policy.attempts, bool) or not 1 <= policy.attempts <= MAX_ATTEMPTS:
        return f"retry.attempts: must be an integer from 1 to {MAX_ATTEMPTS}, got {policy.attempts!r}"
    for field in ("backoff_s", "max_backoff_s"):
        value = getattr(policy, field)
        if not (math.isfinite(value) and value >= 0):
            return f"retry.{field}: must be a finite number of seconds of at least 0, got {value!r}"
    return None


def _serialize_problem(spec: OperationSpec) -> str | None:
    if spec.serialize_by is None:
        return None
    if spec.concurrency_safe:
        return "serialize_by: only an operation declared concurrency_safe=false is serialized"
    problem = pointer_problem(spec.serialize_by, spec.input_schema)
    return f"serialize_by: {problem}" if problem else None


def _streaming_problem(spec: OperationSpec) -> str | None:
    if spec.streaming and json_types(spec.output_schema) != frozenset({"array"}):
        return 'streaming: its result is the array of its items, so its output schema needs "type": "array"'
    return None


def _reconcile_problem(descriptor: ToolDescriptor, spec: OperationSpec) -> str | None:
    if spec.reconcile is None:
        return None
    if spec.side_effect_class is SideEffectClass.READ_ONLY:
        return "reconcile: only a write has an effect to reconcile; a READ_ONLY operation declares none"
    target = descriptor.operations.get(spec.reconcile)
    if target is None:
        return f"reconcile: {descriptor.name} has no operation {spec.reconcile[:128]!r}"
    if target.side_effect_class is not SideEffectClass.READ_ONLY:
        return f"reconcile: {spec.reconcile!r} is {target.side_effect_class.value}; a reconcile operation is READ_ONLY"
    return _answer_problem(spec.reconcile, target.output_schema)


def _answer_problem(name: str, schema: dict[str, Any]) -> str | None:
    for answer in _ANSWERS:
        if problem := first_error(schema, answer):
            return f"reconcile: the output schema of {name!r} refuses the ReconcileAnswer {answer}: {problem}"
    return None
