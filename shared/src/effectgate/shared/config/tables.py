"""TOML tables (or JSON objects) into msgspec structs, with every problem named by its key path.

Shared by the MCP servers file (:mod:`effectgate.shared.mcp.servers`), ``effectgate.toml``
(:mod:`effectgate.shared.config.effectgate_file`) and the registry's tool descriptors, so all
refuse bad input with the same words, e.g.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, TypeVar, Union, get_args, get_origin

import msgspec

from effectgate.shared.config.toml_file import ConfigInvalid

__all__ = ["collect", "convert", "did_you_mean", "problems", "unknown_keys"]

_T = TypeVar("_T")
_P = ParamSpec("_P")

_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>[^`]*)`(?: - at `\$(?P<at>[^`]*)`)?$")
_AT = re.compile(r" - at `\$(?P<at>[^`]*)`$")


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``'; did you mean "command"?'`` for the closest of ``known``, or ``""`` when none is close."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f'; did you mean "{close[0]}"?' if close else ""


def unknown_keys(table: dict[str, Any], known: Iterable[str], where: str) -> list[str]:
    """One problem per key of ``table`` not in ``known``: ``"<where>.<key>: unknown field[; did you mean …]"``."""
    allowed = list(known)
    return [f"{_at(where, key)}: unknown field{did_you_mean(key, allowed)}" for key in table if key not in allowed]


def convert(value: Any, kind: type[_T], where: str) -> _T:
    """Convert a TOML value into ``kind`` (a msgspec struct type).

    Raises:
        ConfigInvalid: the value does not fit; one problem per mistake (:func:`problems`),
            each starting with its key path (``where`` joined with the path inside the value).
    """
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise ConfigInvalid(problems(value, kind, where) or [_pointed(str(exc), where)]) from exc


def collect(found: list[str], parse: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T | None:
    """``parse(*args, **kwargs)``, or ``None`` with what it refused added to ``found``.

    A :class:`ConfigInvalid` adds its problems, another ``ValueError`` its text.
    """
    try:
        return parse(*args, **kwargs)
    except ConfigInvalid as invalid:
        found.extend(invalid.problems)
    except ValueError as error:
        found.append(str(error))
    return None


def problems(value: Any, kind: Any, where: str) -> list[str]:
    """Every mistake of ``value`` as a ``kind``, each ``"<key path>: <what is wrong>"``; ``[]``: it fits.

    A struct's unknown keys (with the closest known field), its missing required fields and
    each field's own mistakes are all reported; a mistake msgspec finds beyond those (a
    struct's ``__post_init__``) is reported as msgspec words it.
    """
    struct = _struct_in(kind, value)
    if struct is not None:
        return _struct_problems(value, struct, where)
    origin, args = get_origin(kind), get_args(kind)
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return [problem for key, item in value.items() for problem in problems(item, args[1], _at(where, key))]
    if origin is list and isinstance(value, list) and len(args) == 1:
        return [problem for index, item in enumerate(value) for problem in problems(item, args[0], f"{where}[{index}]")]
    return _msgspec_problem(value, kind, where)


def _struct_problems(table: dict[str, Any], struct: type[msgspec.Struct], where: str) -> list[str]:
    """The mistakes of ``table`` as a ``struct``, in the table's key order, then the required fields missing.

    A required field is not said missing when an unknown key was taken for it (``period``, ``period_s``).
    """
    fields = {field.encode_name: field for field in msgspec.structs.fields(struct)}
    forbids, found, meant = struct.__struct_config__.forbid_unknown_fields, list[str](), set[str]()
    for key, item in table.items():
        if key in fields:
            found += problems(item, fields[key].type, _at(where, key))
        elif forbids:
            meant.update(difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6))
            found.append(f"{_at(where, key)}: unknown field{did_you_mean(key, fields)}")
    missing = [name for name, field in fields.items() if field.required and name not in table and name not in meant]
    found += [f"{where or '(top level)'}: object missing required field `{name}`" for name in missing]
    return found or _msgspec_problem(table, struct, where)


def _struct_in(kind: Any, value: Any) -> type[msgspec.Struct] | None:
    """The struct type a table ``value`` is read as: ``kind`` itself, or the one struct of an optional ``kind``."""
    if not isinstance(value, dict):
        return None
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
        return kind
    if get_origin(kind) in (Union, types.UnionType):
        structs = [arg for arg in get_args(kind) if isinstance(arg, type) and issubclass(arg, msgspec.Struct)]
        return structs[0] if len(structs) == 1 else None
    return None


def _msgspec_problem(value: Any, kind: Any, where: str) -> list[str]:
    try:
        msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        return [_pointed(str(exc), where)]
    return []


def _at(where: str, key: object) -> str:
    return f"{where}.{key}" if where else str(key)


def _pointed(message: str, where: str) -> str:
    unknown = _UNKNOWN.match(message)
    if unknown is not None:
        return f"{_joined(where, unknown['at'] or '')}.{unknown['field']}: unknown field".lstrip(".")
    located = _AT.search(message)
    at, text = (located["at"], message[: located.start()]) if located else ("", message)
    return f"{_joined(where, at) or '(top level)'}: {text[:1].lower()}{text[1:]}"


def _joined(where: str, at: str) -> str:
    """``where`` followed by msgspec's path inside the value (``.key``, ``[0]``), without a leading dot."""
    return f"{where}{at}" if where else at.lstrip(".")
