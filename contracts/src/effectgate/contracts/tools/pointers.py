"""JSON Pointers (RFC 6901) from a tool descriptor into a call's arguments.

A descriptor names arguments by pointer where effectgate reads them: the URL a call reaches
(``destination``), the amount of money it moves (``amount``) and its cost against a spend
budget (``cost``); :class:`~effectgate.contracts.tools.descriptors.OperationSpec`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

import jsonpointer

from effectgate.contracts.tools.descriptors import OperationSpec

__all__ = ["MISSING", "POINTER_TYPES", "json_types", "pointer_problem", "resolve", "spec_problem", "syntax_problem"]

MISSING: Any = object()
"""What :func:`resolve` returns for a pointer the arguments do not hold."""

POINTER_TYPES: Final = {
    "destination": frozenset({"string"}),
    "amount": frozenset({"number", "integer"}),
    "cost": frozenset({"number", "integer"}),
}
"""Each pointer field of an operation and the JSON Schema types its argument may have."""

_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"))


def resolve(pointer: str, arguments: Mapping[str, Any]) -> Any:
    """The value at ``pointer`` in ``arguments``, or :data:`MISSING`.

    Raises:
        jsonpointer.JsonPointerException: ``pointer`` is not a JSON Pointer.
    """
    return jsonpointer.resolve_pointer(dict(arguments), pointer, MISSING)


def pointer_problem(pointer: str, input_schema: Mapping[str, Any], types: frozenset[str] | None = None) -> str | None:
    """What is wrong with ``pointer`` as a path into arguments of ``input_schema``; ``None``: nothing.

    The pointer must parse (RFC 6901 §3), be non-empty, and follow ``properties`` the
    schema declares at every step; with ``types``, every type the named argument's schema
    admits (:func:`json_types`) must be one of them.
    """
    if problem := syntax_problem(pointer):
        return problem
    parts = jsonpointer.JsonPointer(pointer).parts
    schema: Any = input_schema
    for depth, part in enumerate(parts):
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(properties, Mapping) or part not in properties:
            return f"{pointer!r}: the input schema declares no property {'/'.join(parts[: depth + 1])!r}"
        schema = properties[part]
    return None if types is None else _type_problem(pointer, schema, types)


def syntax_problem(pointer: str) -> str | None:
    """What is wrong with ``pointer`` before any schema is known: not RFC 6901, or empty; ``None``: nothing."""
    try:
        parts = jsonpointer.JsonPointer(pointer).parts
    except jsonpointer.JsonPointerException as error:
        return f"{pointer!r} is not a JSON Pointer (RFC 6901): {error}"
    return None if parts else "the empty pointer names the whole arguments object, not one argument"


def json_types(schema: Any) -> frozenset[str] | None:
    """The JSON types ``schema`` admits, from ``type`` (or ``const`` / ``enum`` values); ``None``: it does not say."""
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type")
    if isinstance(kind, str) or (isinstance(kind, list) and kind and all(isinstance(k, str) for k in kind)):
        return frozenset([kind] if isinstance(kind, str) else kind)
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if isinstance(values, list) and values:
        return frozenset(_json_type(value) for value in values)
    return None


def _json_type(value: Any) -> str:
    found = next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), None)
    return found or ("null" if value is None else "object")


def _type_problem(pointer: str, schema: Any, types: frozenset[str]) -> str | None:
    needed = " or ".join(sorted(types))
    admitted = json_types(schema)
    if admitted is None:
        return f"{pointer!r} names an argument whose schema declares no type; it must be {needed}"
    if not admitted <= types:
        shown = " or ".join(sorted(admitted))
        return f"{pointer!r} names an argument of type {shown}; it must be {needed}"
    return None


def spec_problem(spec: OperationSpec) -> str | None:
    """What is wrong with an operation's ``destination`` / ``amount`` / ``cost``, as ``"<field>: …"``."""
    for field in ("destination", "amount"):
        pointer = getattr(spec, field)
        if pointer is not None and (problem := pointer_problem(pointer, spec.input_schema, POINTER_TYPES[field])):
            return f"{field}: {problem}"
    cost = spec.cost
    if isinstance(cost, str):
        problem = pointer_problem(cost, spec.input_schema, POINTER_TYPES["cost"])
        return f"cost: {problem}" if problem else None
    if cost is not None and (isinstance(cost, bool) or not math.isfinite(cost) or cost < 0):
        return f"cost: must be a finite number of at least 0 or a JSON Pointer, got {cost!r}"
    if cost is not None and Decimal(str(cost)).as_tuple().exponent < -4:  # type: ignore[operator]
        return f"cost: at most 4 decimal places, got {cost!r}"
    return None
