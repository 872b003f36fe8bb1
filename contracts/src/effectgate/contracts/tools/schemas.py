"""JSON Schema (draft 2020-12) validation with jsonschema-rs, compiled once per schema.

Errors name the failing location as a JSON Pointer (RFC 6901) into the instance.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, NoReturn

import jsonschema_rs

from effectgate.contracts.errors import Problem

__all__ = [
    "SchemaError",
    "SchemaUnusable",
    "check_schema",
    "check_self_contained",
    "ensure_usable",
    "first_error",
    "first_error_pointer",
]

_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})
"""Keywords whose object maps names (not keywords) to subschemas: a property may be called ``$ref``."""
_DATA = frozenset({"const", "enum", "default", "examples"})
"""Keywords whose values are instance data, never schemas (2020-12 Validation §6.1.2-3, §9)."""


class SchemaError(Problem, ValueError):
    """A schema is itself invalid.

    Attributes:
        pointer: JSON Pointer (RFC 6901) of the offending keyword in the schema, when known.
    """

    def __init__(self, message: str, pointer: str | None = None) -> None:
        super().__init__(message)
        self.pointer = pointer


class SchemaUnusable(SchemaError):
    """A stored schema cannot be compiled when it is used (it never passed, or no longer passes, the gate)."""


def _refuse_retrieval(uri: str) -> NoReturn:
    raise SchemaError(f"{uri!r} is not fetched: schemas must be self-contained")


_OFFLINE = jsonschema_rs.Registry([], retriever=_refuse_retrieval)


@lru_cache(maxsize=1024)
def _compiled(schema_json: str) -> Any:
    return jsonschema_rs.validator_for(json.loads(schema_json), validate_formats=True, retriever=_refuse_retrieval)


def _validator(schema: dict[str, Any]) -> Any:
    return _compiled(json.dumps(schema, sort_keys=True))


def check_schema(schema: dict[str, Any]) -> None:
    """Check ``schema`` before it is stored: self-contained, valid, compilable; nothing fetched.

    Its meta-schema is draft 2020-12 unless ``$schema`` names another one jsonschema-rs
    bundles (drafts 4, 6, 7, 2019-09).

    Raises:
        SchemaError: not an object, a reference that is not fragment-only (with its
            ``pointer``), invalid against its meta-schema, or not compilable.
    """
    if not isinstance(schema, dict):
        raise SchemaError("a schema must be a JSON object")
    check_self_contained(schema)
    _check_meta(schema)
    try:
        _validator(schema)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as error:
        raise SchemaError(_first_line(error)) from None


def _check_meta(schema: dict[str, Any]) -> None:
    """Validate against the meta-schema; one jsonschema-rs does not bundle is refused, not fetched."""
    try:
        jsonschema_rs.meta.validate(schema, registry=_OFFLINE)
    except jsonschema_rs.ReferencingError:
        message = f"/$schema: {str(schema.get('$schema'))[:200]!r} is not a bundled meta-schema; it is not fetched"
        raise SchemaError(message, pointer="/$schema") from None
    except jsonschema_rs.ValidationError as error:
        raise SchemaError(_first_line(error)) from None


def check_self_contained(schema: Any) -> None:
    """Refuse any reference keyword of ``schema`` that is not fragment-only (module docstring).

    The walk is iterative (any depth). Keys of ``properties``, ``$defs`` and the other
    name maps are names, not keywords; ``const``, ``enum``, ``default`` and ``examples``
    hold data and are not walked. Every other object is walked as a possible schema.

    Raises:
        SchemaError: naming the JSON Pointer of the first offending keyword found.
    """
    pending: list[tuple[Any, str, bool]] = [(schema, "", False)]
    while pending:
        node, pointer, is_name_map = pending.pop()
        if isinstance(node, dict):
            if not is_name_map:
                _check_references(node, pointer)
            pending.extend(_members(node, pointer, is_name_map))
        elif isinstance(node, list):
            pending.extend((item, f"{pointer}/{index}", False) for index, item in enumerate(node))


def _members(node: dict[str, Any], pointer: str, is_name_map: bool) -> Iterator[tuple[Any, str, bool]]:
    """Yield ``(value, pointer, is_name_map)`` of each member of ``node`` worth walking."""
    for key, value in node.items():
        if is_name_map or key not in _DATA:
            yield value, f"{pointer}/{_escape(key)}", not is_name_map and key in _NAME_MAPS


def _check_references(node: dict[str, Any], pointer: str) -> None:
    for keyword in _REFERENCES:
        target = node.get(keyword)
        if isinstance(target, str) and not target.startswith("#"):
            where = f"{pointer}/{keyword}"
            message = f"{keyword} {target[:200]!r} is not a same-document reference (it must start with '#')"
            raise SchemaError(f"{where}: {message}: schemas must be self-contained", pointer=where)


def _escape(token: str) -> str:
    """One JSON Pointer reference token (RFC 6901 §3: ``~`` → ``~0``, ``/`` → ``~1``)."""
    return token.replace("~", "~0").replace("/", "~1")


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def ensure_usable(schema: dict[str, Any]) -> None:
    """Compile ``schema`` (cached) without fetching anything.

    Raises:
        SchemaUnusable: it cannot be compiled (a reference to anything outside it, an
            unknown meta-schema, an invalid schema).
    """
    _usable(schema)


def _usable(schema: dict[str, Any]) -> Any:
    try:
        return _validator(schema)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError, TypeError) as error:
        raise SchemaUnusable(f"schema cannot be compiled: {_first_line(error)}") from None


def first_error(schema: dict[str, Any], instance: Any) -> str | None:
    """Return ``"<json pointer>: <message>"`` of the first violation, or ``None`` if valid.

    Raises:
        SchemaUnusable: ``schema`` cannot be compiled (see :func:`ensure_usable`); the
            caller decides what that means (the policy denies: fail closed).
    """
    for error in _usable(schema).iter_errors(instance):
        pointer = "/" + "/".join(str(part) for part in error.instance_path)
        return f"{pointer}: {error.message}"
    return None


def first_error_pointer(schema: dict[str, Any], instance: Any) -> str | None:
    """The JSON Pointer of the first violation, without the message (which may quote the value), or ``None``.

    Raises:
        SchemaUnusable: as :func:`first_error`.
    """
    for error in _usable(schema).iter_errors(instance):
        return "/" + "/".join(str(part) for part in error.instance_path)
    return None
