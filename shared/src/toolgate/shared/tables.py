"""TOML tables into msgspec structs, with errors that name the key path and what is wrong.

Shared by the MCP servers file (:mod:`toolgate.shared.mcp_config`) and ``toolgate.toml``
(:mod:`toolgate.shared.config`), so both refuse bad input with the same words, e.g.
``mcp.servers.git.comand: unknown field; did you mean "command"?``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any, TypeVar

import msgspec

__all__ = ["convert", "did_you_mean", "unknown_keys"]

_T = TypeVar("_T")

_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>[^`]*)`(?: - at `\$(?P<at>[^`]*)`)?$")
_AT = re.compile(r" - at `\$(?P<at>[^`]*)`$")


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``'; did you mean "command"?'`` for the closest of ``known``, or ``""`` when none is close."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f'; did you mean "{close[0]}"?' if close else ""


def unknown_keys(table: dict[str, Any], known: Iterable[str], where: str) -> list[str]:
    """One problem per key of ``table`` not in ``known``: ``"<where>.<key>: unknown field[; did you mean …]"``."""
    allowed = list(known)
    prefix = f"{where}." if where else ""
    return [f"{prefix}{key}: unknown field{did_you_mean(key, allowed)}" for key in table if key not in allowed]


def convert(value: Any, kind: type[_T], where: str) -> _T:
    """Convert a TOML value into ``kind`` (a msgspec struct type).

    Raises:
        ValueError: the value does not fit; the message starts with the key path of the
            bad value (``where`` joined with msgspec's path) and says what is wrong; an
            unknown field of ``kind`` itself gets the closest known field suggested.
    """
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise ValueError(_pointed(str(exc), kind, where)) from exc


def _pointed(message: str, kind: type[Any], where: str) -> str:
    unknown = _UNKNOWN.match(message)
    if unknown is not None:
        at, field = unknown["at"] or "", unknown["field"]
        hint = "" if at else did_you_mean(field, _names(kind))
        return f"{where}{at}.{field}: unknown field{hint}"
    located = _AT.search(message)
    at, text = (located["at"], message[: located.start()]) if located else ("", message)
    return f"{where}{at}: {text[:1].lower()}{text[1:]}"


def _names(kind: type[Any]) -> list[str]:
    return [field.encode_name for field in msgspec.structs.fields(kind)]
