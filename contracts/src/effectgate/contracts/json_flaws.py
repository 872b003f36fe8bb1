r"""Where a JSON text holds what a strict decoder refuses: an RFC 6901 JSON Pointer for every refusal.

A strict decoder refuses what a JSON text cannot carry into a hash — msgspec a float beyond
the double range (``1e400``), ``NaN``, a lone surrogate escape (``"\ud800"``), invalid UTF-8
and nesting past its recursion limit; the MCP SDK's parser the last three — but names the
place as a byte offset, a line and column, or a path without object keys
(``$.arguments[...][1]``). :func:`flaw_of` names it as a JSON Pointer into the text's
value, as :func:`effectgate.contracts.integrity.canonical.unrepresentable` names an integer beyond
±(2**53 − 1):

- invalid UTF-8: the value holding the first invalid byte (a key's: its object);
- otherwise the text is read by Python's own ``json`` decoder, which is permissive (``NaN``,
  ``Infinity``, ``1e400`` as infinity, lone surrogates, big integers; duplicate keys last
  wins, as msgspec and ``pydantic_core`` read them), and the value is checked with
  ``unrepresentable``: the first part with no canonical form (RFC 8785) is named;
- nesting too deep even for that decoder: the first container deeper than ``max_depth``;
- a syntax error: the value being read where the decoder stopped.

The pointers are found by reading the text's strings and brackets in one pass (what lies
between them only counted for commas), never by recursion; an object key that is not
valid Unicode is never put in a pointer (its object is named instead). A flaw of the whole
text (at its root) is left to the decoder's own message.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from effectgate.contracts.integrity.canonical import MAX_DEPTH, json_pointer, unrepresentable

__all__ = ["flaw_of"]

_TOKEN = re.compile(r'"(?:[^"\\]|\\[\s\S])*(?:"(\s*:)?)?|[\[\]{}]')
"""A string (group 1 set when a ``:`` follows: a member name) or a bracket. An unterminated
string runs to the end, so no character is read twice; what lies between two tokens
(numbers, literals, ``,`` and ``:``) is skipped and its commas counted by ``str`` methods."""


_INT_DIGITS = 24
"""Longest integer literal converted as it is; a longer one is beyond ±(2**53 − 1) whatever its digits."""


def flaw_of(data: bytes, max_depth: int = MAX_DEPTH) -> str | None:
    """``"<JSON Pointer>: <what is wrong>"`` for the first flaw of the JSON text ``data`` (module doc).

    Args:
        data: the JSON text, as received.
        max_depth: deepest nesting accepted (the root counts as depth 1).

    Returns:
        The pointer and the problem; ``None`` when the text is JSON whose every value has a
        canonical form, or when the flaw is the whole text (a decoder's own message, at
        byte 0 or at the end, then says as much).
    """
    found = _flaw(data, max_depth)
    return found if found is not None and not found.startswith(":") else None


def _flaw(data: bytes, max_depth: int) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        text = data.decode("utf-8", "surrogateescape")
        at = len(data[: error.start].decode("utf-8"))
        return f"{json_pointer(_path(text, at, max_depth))}: invalid UTF-8 (byte {error.start})"
    try:
        return unrepresentable(json.loads(text, parse_int=_integer), max_depth)
    except RecursionError:
        return f"{json_pointer(_path(text, len(text), max_depth))}: nested deeper than {max_depth} levels"
    except json.JSONDecodeError as error:
        return f"{json_pointer(_path(text, error.pos, max_depth))}: not JSON ({error.msg}, character {error.pos})"
    except ValueError:
        return None  # nothing else is expected of the decoder; a locator never raises


def _integer(literal: str) -> int:
    """An integer literal; one too long for ``int`` (Python's 4,300-digit limit) is some integer beyond ±2**64."""
    if len(literal) <= _INT_DIGITS:
        return int(literal)
    return -(2**64) if literal.startswith("-") else 2**64


def _path(text: str, stop: int, max_depth: int) -> list[str]:
    """The reference tokens of the value read at character ``stop``, or of the first container past ``max_depth``."""
    frames: list[list[Any]] = []  # per open container: [is an object, current key (None: none yet) or index]
    last = 0
    for match in _TOKEN.finditer(text, 0, stop):
        _between(frames, text, last, match.start())
        last, token = match.end(), match.group()
        if token in ("{", "["):
            if len(frames) >= max_depth:
                break
            frames.append([token == "{", None if token == "{" else 0])
        elif token in ("}", "]"):
            del frames[-1:]
        elif match.group(1) is not None and frames and frames[-1][0]:
            frames[-1][1] = _key(token[: match.start(1) - match.start()])
    else:
        _between(frames, text, last, stop)
    return [str(frame[1]) for frame in itertools.takewhile(lambda frame: frame[1] is not None, frames)]


def _between(frames: list[list[Any]], text: str, start: int, end: int) -> None:
    """Account for the commas of ``text[start:end]`` (no token there): the next element, or no key yet."""
    if frames and end > start and (commas := text.count(",", start, end)):
        top = frames[-1]
        top[1] = None if top[0] else top[1] + commas


def _key(token: str) -> str | None:
    """A member name token decoded; ``None`` when it is not valid Unicode (its object is named instead)."""
    try:
        key = json.loads(token)
        key.encode("utf-8")
    except (ValueError, AttributeError):
        return None
    return key if isinstance(key, str) else None
