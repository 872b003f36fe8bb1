"""Cedar types for a call's arguments, generated from the operations' input JSON Schemas."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_DEPTH", "CedarType", "Vocabulary", "operation_types", "render", "view"]

MAX_DEPTH = 6
"""Deepest nesting of records and sets given to the policy."""

_SCALARS = {"string": "String", "integer": "Long", "number": "decimal", "boolean": "Bool"}
_SECRET_MARKERS = ("writeOnly", "x-effectgate-secret")


@dataclass(frozen=True, slots=True)
class CedarType:
    """A Cedar type: ``kind`` is ``String``, ``Long``, ``decimal``, ``Bool``, ``Set`` or ``Record``.

    Attributes:
        kind: the type's name.
        element: the element type of a ``Set``.
        attributes: the attributes of a ``Record``, sorted by name (all optional).
    """

    kind: str
    element: CedarType | None = None
    attributes: tuple[tuple[str, CedarType], ...] = ()

    def attribute(self, name: str) -> CedarType | None:
        """The type of attribute ``name`` of a record, or ``None``."""
        return dict(self.attributes).get(name)


RecordType = dict[str, CedarType]


def _typed(schema: Any, where: str, notes: list[str], depth: int) -> CedarType | None:
    if not isinstance(schema, Mapping):
        return None
    if any(schema.get(marker) is True for marker in _SECRET_MARKERS):
        notes.append(f"{where}: a secret argument, never given to the policy")
        return None
    kind = schema.get("type")
    if depth > MAX_DEPTH:
        notes.append(f"{where}: nested deeper than {MAX_DEPTH} levels, left out")
        return None
    if isinstance(kind, str) and kind in _SCALARS:
        return CedarType(_SCALARS[kind])
    if kind == "array":
        element = _typed(schema.get("items"), f"{where}[]", notes, depth + 1)
        return CedarType("Set", element=element) if element else _untyped(where, notes, "items have no Cedar type")
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        record = _record(schema["properties"], where, notes, depth + 1)
        return CedarType("Record", attributes=tuple(sorted(record.items())))
    return _untyped(where, notes, "no single type Cedar can hold")


def _untyped(where: str, notes: list[str], why: str) -> CedarType | None:
    notes.append(f"{where}: {why}, left out")
    return None


def _record(properties: Mapping[str, Any], where: str, notes: list[str], depth: int) -> RecordType:
    record: RecordType = {}
    for name, schema in properties.items():
        if (typed := _typed(schema, f"{where}.{name}", notes, depth)) is not None:
            record[name] = typed
    return record


def operation_types(input_schema: Mapping[str, Any], where: str) -> tuple[RecordType, list[str]]:
    """The Cedar types of one operation's arguments, and a note per property left out.

    Args:
        input_schema: the operation's input JSON Schema (an object schema).
        where: how notes name the operation, e.g. ``"bank@1.0.0.send_money"``.
    """
    notes: list[str] = []
    properties = input_schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}, notes
    return _record(properties, f"{where} args", notes, 1), notes


_PRECEDENCE = ("String", "decimal", "Long", "Bool", "Set", "Record")
"""Which type a name keeps when operations type it differently: the earlier here."""


def _merge(a: CedarType, b: CedarType, path: str, notes: list[str]) -> CedarType:
    """The type holding both; on a conflict the one earlier in :data:`_PRECEDENCE`, said in ``notes``."""
    if a.kind == b.kind == "Record":
        merged = dict(a.attributes)
        for name, typed in b.attributes:
            merged[name] = _merge(merged[name], typed, f"{path}.{name}", notes) if name in merged else typed
        return CedarType("Record", attributes=tuple(sorted(merged.items())))
    if a.kind == b.kind == "Set" and a.element and b.element:
        return CedarType("Set", element=_merge(a.element, b.element, f"{path}[]", notes))
    if a == b:
        return a
    kept = min(a, b, key=lambda t: _PRECEDENCE.index(t.kind)) if a.kind != b.kind else a
    other = b if kept is a else a
    notes.append(f"{path}: typed {render(kept)} and {render(other)} by different operations; kept {render(kept)}")
    return kept


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The ``context.args`` record every policy is validated against.

    Attributes:
        attributes: name to type, every attribute optional.
        notes: what was left out and why, one line each (logged at load).
        fed: the descriptor pointers some registered operation declares (``amount``,
            ``destination``), which feed ``context.amount`` / ``context.destination_host``.
        others: each name typed otherwise by some operation, with that type.
        closed: ``context.args`` paths every registered schema gives an ``enum`` / ``const``,
            with their values (:func:`effectgate.policy.cedar.closed_sets.argument_values`).
    """

    attributes: tuple[tuple[str, CedarType], ...]
    notes: tuple[str, ...]
    fed: frozenset[str] = frozenset()
    others: tuple[tuple[str, CedarType], ...] = ()
    closed: tuple[tuple[str, frozenset[tuple[str, Any]]], ...] = ()

    @classmethod
    def of(cls, operations: Iterable[tuple[str, Mapping[str, Any]]]) -> Vocabulary:
        """The union of ``(where, input_schema)`` pairs; a name typed two ways keeps one type (noted)."""
        record: RecordType = {}
        notes: list[str] = []
        seen: dict[str, list[CedarType]] = {}
        for where, schema in sorted(operations, key=lambda pair: pair[0]):
            types, left_out = operation_types(schema, where)
            notes += left_out
            for name, typed in types.items():
                seen.setdefault(name, []).append(typed)
                record[name] = _merge(record[name], typed, f"args.{name}", notes) if name in record else typed
        others = {(n, t) for n, types in seen.items() for t in types if t.kind != record[n].kind}
        return cls(tuple(sorted(record.items())), tuple(notes), others=tuple(sorted(others, key=repr)))

    def alternatives(self) -> Iterator[Vocabulary]:
        """This vocabulary with one name typed as another operation types it, each in turn.

        A policy written for the type that lost the precedence can then still be built:
        a registered schema alone never unloads it (:func:`effectgate.policy.cedar.loading.build_engine`).
        """
        for name, typed in self.others:
            attributes = tuple(sorted({**dict(self.attributes), name: typed}.items()))
            note = f"args.{name}: typed {render(typed)} instead, as the policy reads it"
            yield dataclasses.replace(self, attributes=attributes, others=(), notes=(*self.notes, note))

    def record(self) -> CedarType:
        """The vocabulary as one Cedar record type."""
        return CedarType("Record", attributes=self.attributes)


def view(own: CedarType, vocabulary: CedarType) -> CedarType | None:
    """The part of ``own`` (an operation's type) that ``vocabulary`` holds with the same type."""
    if own.kind != vocabulary.kind:
        return None
    if own.kind == "Set":
        element = view(own.element, vocabulary.element) if own.element and vocabulary.element else None
        return CedarType("Set", element=element) if element == own.element else None
    if own.kind == "Record":
        theirs = dict(vocabulary.attributes)
        kept = [(name, seen) for name, typed in own.attributes if (seen := _view_in(typed, theirs.get(name)))]
        return CedarType("Record", attributes=tuple(kept))
    return own


def _view_in(own: CedarType, theirs: CedarType | None) -> CedarType | None:
    return view(own, theirs) if theirs is not None else None


def _quoted(name: str) -> str:
    r"""``name`` as a Cedar string literal: quotes, backslashes and unprintable characters as ``\u{…}``."""
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{{{ord(c):x}}}" for c in name) + '"'


def render(typed: CedarType) -> str:
    """Cedar schema syntax for ``typed``; record attributes are optional (``"name"?: T``).

    Syntax: https://docs.cedarpolicy.com/schema/human-readable-schema.html.
    """
    if typed.kind == "Set" and typed.element:
        return f"Set<{render(typed.element)}>"
    if typed.kind == "Record":
        inner = ", ".join(f"{_quoted(name)}?: {render(t)}" for name, t in typed.attributes)
        return "{" + inner + "}"
    return typed.kind
