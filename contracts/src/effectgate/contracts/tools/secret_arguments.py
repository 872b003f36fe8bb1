"""Which arguments of an operation are secret, and what the gateway accepts in their place.

A property is secret when its subschema has ``writeOnly: true`` (JSON Schema 2020-12 Validation
§9.4, the meta-data vocabulary: "the value is never returned") or the effectgate keyword
``x-effectgate-secret: true``. Supported places: a property (``properties``) of the root object
schema, or of an object property's subschema, at any depth; a secret object is sealed whole.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from effectgate.contracts.integrity.sealing import MAX_SEALED_CHARS, MIN_SEALED_CHARS, SEALED, SEALED_LABEL, is_envelope
from effectgate.contracts.tools.schemas import SchemaUnusable

__all__ = [
    "ENVELOPE_SCHEMA",
    "Secret",
    "policy_schema",
    "redact_sealed",
    "replace_secrets",
    "sealing_problem",
    "secret_arguments",
]

MARKERS = ("writeOnly", "x-effectgate-secret")
ENVELOPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {SEALED: {"type": "string", "minLength": MIN_SEALED_CHARS, "maxLength": MAX_SEALED_CHARS}},
    "required": [SEALED],
    "additionalProperties": False,
}
"""What the policy's copy of an input schema accepts for a secret property."""
_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})
_DATA = frozenset({"const", "enum", "default", "examples"})


@dataclass(frozen=True)
class Secret:
    """One secret property: its path in the arguments and its subschema's path in the input schema."""

    path: tuple[str, ...]
    schema_path: tuple[str, ...]

    @property
    def pointer(self) -> str:
        """The RFC 6901 JSON Pointer of the value in the arguments."""
        return pointer(self.path)


def pointer(path: tuple[str, ...]) -> str:
    """RFC 6901 JSON Pointer of ``path`` (``~`` → ``~0``, ``/`` → ``~1``)."""
    return "".join("/" + token.replace("~", "~0").replace("/", "~1") for token in path)


def secret_arguments(schema: dict[str, Any]) -> tuple[Secret, ...]:
    """The secret properties of an input schema (module docstring), outermost first.

    Raises:
        SchemaUnusable: a marker where it is not supported, or ``x-effectgate-secret`` that
            is not a boolean; the error names its pointer in the schema.
    """
    return _secrets(json.dumps(schema, sort_keys=True))


@lru_cache(maxsize=1024)
def _secrets(schema_json: str) -> tuple[Secret, ...]:
    schema = json.loads(schema_json)
    found = _supported(schema)
    for marked in _markers(schema):
        if not any(marked[: len(secret.schema_path)] == secret.schema_path for secret in found):
            where = pointer(marked)
            reason = (
                "a secret marker is supported only on a property of an object schema; here it would travel in clear"
            )
            raise SchemaUnusable(f"{where}: {reason}", pointer=where)
    return tuple(found)


def _is_secret(node: Any) -> bool:
    return isinstance(node, dict) and any(node.get(marker) is True for marker in MARKERS)


def _supported(schema: Any) -> list[Secret]:
    found: list[Secret] = []
    pending: list[tuple[tuple[str, ...], tuple[str, ...], Any]] = [((), (), schema)]
    while pending:
        path, schema_path, node = pending.pop(0)
        properties = node.get("properties") if isinstance(node, dict) else None
        if not isinstance(properties, dict):
            continue
        for name, sub in properties.items():
            here, schema_here = (*path, name), (*schema_path, "properties", name)
            if _is_secret(sub):
                found.append(Secret(here, schema_here))
            elif isinstance(sub, dict):
                pending.append((here, schema_here, sub))
    return found


def _markers(schema: Any) -> Iterator[tuple[str, ...]]:
    """Schema paths of every subschema carrying a marker (names and data are not walked as schemas)."""
    pending: list[tuple[Any, tuple[str, ...], bool]] = [(schema, (), False)]
    while pending:
        node, path, is_name_map = pending.pop()
        if isinstance(node, dict):
            if not is_name_map and _marked(node, path):
                yield path
            for key, value in node.items():
                if is_name_map or key not in _DATA:
                    pending.append((value, (*path, key), not is_name_map and key in _NAME_MAPS))
        elif isinstance(node, list):
            pending.extend((item, (*path, str(index)), False) for index, item in enumerate(node))


def _marked(node: dict[str, Any], path: tuple[str, ...]) -> bool:
    flag = node.get("x-effectgate-secret", False)
    if not isinstance(flag, bool):
        where = pointer((*path, "x-effectgate-secret"))
        raise SchemaUnusable(f"{where}: x-effectgate-secret must be a boolean", pointer=where)
    return _is_secret(node)


def policy_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` whose secret subschemas accept only :data:`ENVELOPE_SCHEMA`.

    Raises:
        SchemaUnusable: as :func:`secret_arguments`.
    """
    secrets = secret_arguments(schema)
    if not secrets:
        return schema
    copied = copy.deepcopy(schema)
    for secret in secrets:
        parent = copied
        for token in secret.schema_path[:-1]:
            parent = parent[token]
        parent[secret.schema_path[-1]] = ENVELOPE_SCHEMA
    return copied


def sealing_problem(secrets: tuple[Secret, ...], arguments: dict[str, Any]) -> tuple[str, str] | None:
    """``(reason_code, "<pointer>: why")`` for a secret sent in clear or an envelope out of place, else ``None``.

    Codes: ``secret_not_sealed`` (a secret property holds anything but an envelope; the
    value is never quoted), ``sealed_unexpected`` (an object with ``$sealed`` where the
    schema has no secret).
    """
    for secret in secrets:
        found, value = _get(arguments, secret.path)
        if found and not is_envelope(value):
            why = 'a secret argument must be sealed to the executor ({"$sealed": …}); its value is not shown'
            return "secret_not_sealed", f"{secret.pointer}: {why}"
    for path in _stray_envelopes(arguments, {secret.path for secret in secrets}):
        return "sealed_unexpected", f"{pointer(path)}: a sealed envelope where the input schema has no secret argument"
    return None


def _get(arguments: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    node = arguments
    for token in path:
        if not isinstance(node, dict) or token not in node:
            return False, None
        node = node[token]
    return True, node


def _stray_envelopes(arguments: Any, expected: set[tuple[str, ...]]) -> Iterator[tuple[str, ...]]:
    pending: list[tuple[Any, tuple[str, ...]]] = [(arguments, ())]
    while pending:
        node, path = pending.pop()
        if path in expected:
            continue
        if isinstance(node, dict):
            if SEALED in node:
                yield path
            pending.extend((value, (*path, key)) for key, value in node.items())
        elif isinstance(node, list):
            pending.extend((item, (*path, str(index))) for index, item in enumerate(node))


def replace_secrets(
    arguments: dict[str, Any], secrets: tuple[Secret, ...], replace: Callable[[Secret, Any], Any]
) -> dict[str, Any]:
    """A deep copy of ``arguments`` with each present secret value ``v`` replaced by ``replace(secret, v)``.

    Secrets never nest (a secret object is one secret), so each is replaced once.
    """
    copied = copy.deepcopy(arguments)
    for secret in secrets:
        found, value = _get(copied, secret.path)
        if found:
            _get(copied, secret.path[:-1])[1][secret.path[-1]] = replace(secret, value)
    return copied


def redact_sealed(value: Any) -> Any:
    """``value`` with every sealed envelope shown as :data:`SEALED_LABEL` (for people, never for hashing)."""
    if is_envelope(value) or (isinstance(value, dict) and SEALED in value):
        return SEALED_LABEL
    if isinstance(value, dict):
        return {key: redact_sealed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_sealed(item) for item in value]
    return value
