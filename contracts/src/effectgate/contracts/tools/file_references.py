"""Which arguments of an operation name files, and the file references one call makes (pure).

A property is a file reference when its subschema says ``x-effectgate-file: true``. Its value
is a path or a list of paths, relative to the tool's *file root*: the ``file_system`` sandbox,
or the ``file_root`` an MCP server's configuration declares.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from effectgate.contracts.tools.schemas import SchemaUnusable
from effectgate.contracts.tools.secret_arguments import MARKERS, pointer

__all__ = ["FILE_MARKER", "Reference", "file_places", "file_references"]

FILE_MARKER = "x-effectgate-file"
"""The schema keyword that makes a property a file reference."""

_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})
_DATA = frozenset({"const", "enum", "default", "examples"})


@dataclass(frozen=True)
class Reference:
    """One file reference of a call.

    Attributes:
        pointer: RFC 6901 JSON Pointer of the value in the arguments (``/path``, ``/files/2``).
        path: the path as given; ``None`` when the value there is not a string.
    """

    pointer: str
    path: str | None


def file_places(schema: dict[str, Any]) -> tuple[tuple[str, ...], ...]:
    """The argument paths of an input schema's file-reference properties: outermost first, then by name.

    Raises:
        SchemaUnusable: a marker where it is not supported (module docstring), naming its pointer.
    """
    return _places(json.dumps(schema, sort_keys=True))


def file_references(schema: dict[str, Any], arguments: dict[str, Any]) -> tuple[Reference, ...]:
    """The file references ``arguments`` make under ``schema``, in :func:`file_places` order (a list item by item).

    Raises:
        SchemaUnusable: as :func:`file_places`.
    """
    found: list[Reference] = []
    for place in file_places(schema):
        present, value = _get(arguments, place)
        if not present:
            continue
        if isinstance(value, list):
            found += [Reference(pointer((*place, str(i))), _path(item)) for i, item in enumerate(value)]
        else:
            found.append(Reference(pointer(place), _path(value)))
    return tuple(found)


def _path(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@lru_cache(maxsize=1024)
def _places(schema_json: str) -> tuple[tuple[str, ...], ...]:
    schema = json.loads(schema_json)
    found = _supported(schema)
    for marked, node in _marked(schema):
        where = pointer((*marked, FILE_MARKER))
        if not isinstance(node[FILE_MARKER], bool):
            raise SchemaUnusable(f"{where}: {FILE_MARKER} must be a boolean", pointer=where)
        if node[FILE_MARKER] and any(node.get(marker) is True for marker in MARKERS):
            raise SchemaUnusable(f"{where}: a secret argument cannot be a file reference", pointer=where)
        if node[FILE_MARKER] and marked not in found:
            why = "a file reference is supported only on a property of an object schema; here it would not be bound"
            raise SchemaUnusable(f"{where}: {why}", pointer=where)
    return tuple(found.values())


def _supported(schema: Any) -> dict[tuple[str, ...], tuple[str, ...]]:
    """Schema path → argument path of every property carrying the marker in a supported place."""
    found: dict[tuple[str, ...], tuple[str, ...]] = {}
    pending: list[tuple[tuple[str, ...], tuple[str, ...], Any]] = [((), (), schema)]
    while pending:
        path, schema_path, node = pending.pop(0)
        properties = node.get("properties") if isinstance(node, dict) else None
        if not isinstance(properties, dict):
            continue
        for name, sub in properties.items():
            here, schema_here = (*path, name), (*schema_path, "properties", name)
            if isinstance(sub, dict) and sub.get(FILE_MARKER) is True:
                found[schema_here] = here
            elif isinstance(sub, dict):
                pending.append((here, schema_here, sub))
    return found


def _marked(schema: Any) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every subschema carrying the marker, with its schema path (names and data are not walked as schemas)."""
    pending: list[tuple[Any, tuple[str, ...], bool]] = [(schema, (), False)]
    while pending:
        node, path, is_name_map = pending.pop()
        if isinstance(node, dict):
            if not is_name_map and FILE_MARKER in node:
                yield path, node
            for key, value in node.items():
                if is_name_map or key not in _DATA:
                    pending.append((value, (*path, key), not is_name_map and key in _NAME_MAPS))
        elif isinstance(node, list):
            pending.extend((item, (*path, str(index)), False) for index, item in enumerate(node))


def _get(arguments: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    node = arguments
    for token in path:
        if not isinstance(node, dict) or token not in node:
            return False, None
        node = node[token]
    return True, node
