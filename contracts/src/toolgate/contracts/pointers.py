"""JSON Pointers (RFC 6901) from a tool descriptor into a call's arguments.

A descriptor names arguments by pointer where toolgate reads them: the URL a call
reaches (``destination``), the amount of money it moves (``amount``) and its cost against
a spend budget (``cost``); :class:`~toolgate.contracts.descriptors.OperationSpec`. Parsing and
resolution are the ``jsonpointer`` package's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import jsonpointer

from toolgate.contracts.descriptors import OperationSpec

__all__ = ["MISSING", "pointer_problem", "resolve", "spec_problem"]

MISSING: Any = object()
"""What :func:`resolve` returns for a pointer the arguments do not hold."""


def resolve(pointer: str, arguments: Mapping[str, Any]) -> Any:
    """The value at ``pointer`` in ``arguments``, or :data:`MISSING`.

    Raises:
        jsonpointer.JsonPointerException: ``pointer`` is not a JSON Pointer.
    """
    return jsonpointer.resolve_pointer(dict(arguments), pointer, MISSING)


def pointer_problem(pointer: str, input_schema: Mapping[str, Any]) -> str | None:
    """What is wrong with ``pointer`` as a path into arguments of ``input_schema``; ``None``: nothing.

    The pointer must parse (RFC 6901 §3), be non-empty, and follow ``properties`` the
    schema declares at every step.
    """
    try:
        parts = jsonpointer.JsonPointer(pointer).parts
    except jsonpointer.JsonPointerException as error:
        return f"{pointer!r} is not a JSON Pointer (RFC 6901): {error}"
    if not parts:
        return "the empty pointer names the whole arguments object, not one argument"
    schema: Any = input_schema
    for depth, part in enumerate(parts):
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(properties, Mapping) or part not in properties:
            return f"{pointer!r}: the input schema declares no property {'/'.join(parts[: depth + 1])!r}"
        schema = properties[part]
    return None


def spec_problem(spec: OperationSpec) -> str | None:
    """What is wrong with an operation's ``destination`` / ``amount`` / ``cost``, as ``"<field>: …"``."""
    for field in ("destination", "amount"):
        pointer = getattr(spec, field)
        if pointer is not None and (problem := pointer_problem(pointer, spec.input_schema)):
            return f"{field}: {problem}"
    cost = spec.cost
    if isinstance(cost, str):
        return f"cost: {problem}" if (problem := pointer_problem(cost, spec.input_schema)) else None
    if cost is not None and (isinstance(cost, bool) or not math.isfinite(cost) or cost < 0):
        return f"cost: must be a finite number of at least 0 or a JSON Pointer, got {cost!r}"
    if cost is not None and Decimal(str(cost)).as_tuple().exponent < -4:  # type: ignore[operator]
        return f"cost: at most 4 decimal places, got {cost!r}"
    return None
