"""Where in a policy file a problem is: ``line:column``, found with Cedar's own parser."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import cedarpy

__all__ = [
    "MAX_PARSED_CHARS",
    "MAX_PROBES",
    "Finding",
    "at",
    "needles_of",
    "parse_error_offset",
    "policy_spans",
    "position",
]

MAX_PROBES = 20_000
"""Most prefixes parsed to locate one problem; beyond it no position is given."""

MAX_PARSED_CHARS = 8_000_000
"""Most characters parsed, over all prefixes, to locate one problem (a long policy ahead of
its error costs its length per line); beyond it no position is given."""

_END = ("unexpected end of input",)
_QUOTED = re.compile(r"`([^`]+)`|'([^']+)'")
_WORD, _OPERATOR = r"[A-Za-z0-9_]", r"[=<>!&|+\-*.]"
_AFTER_COLON = re.compile(r": ([^\s:]+)$")


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem of one policy, to be placed in the text.

    Attributes:
        cedar_id: the policy's ``policy<N>``.
        message: what is wrong, naming the policy's ``@id``.
        needle: source text to place it at (:func:`at`); ``None``: the policy's first line.
    """

    cedar_id: str
    message: str
    needle: str | None = None


def position(text: str, offset: int) -> str:
    """``line:column`` (1-based) of character ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    return f"{line}:{offset - (text.rfind(chr(10), 0, offset) + 1) + 1}"


def needles_of(message: str) -> list[str]:
    """The source texts a Cedar message names: its `` `quoted` `` parts, else what follows its last colon."""
    if quoted := _QUOTED.findall(message):
        return [backticked or single for backticked, single in quoted]
    found = _AFTER_COLON.search(message)
    return [found[1]] if found else []


def _error(text: str) -> str | None:
    try:
        cedarpy.PolicySet.from_str(text)
    except ValueError as error:
        return str(error)
    return None


def _line_ends(text: str, start: int) -> Iterator[int]:
    while (end := text.find("\n", start)) != -1:
        yield end + 1
        start = end + 1
    yield len(text)


def parse_error_offset(text: str, message: str) -> int | None:
    """Where the parse error ``message`` (Cedar's for the whole ``text``) starts; ``None``: not found."""
    if message in _END:
        return len(text.rstrip())
    start, parsed = 0, 0
    for probes, end in enumerate(_line_ends(text, 0)):
        parsed += end - start
        if probes >= MAX_PROBES or parsed > MAX_PARSED_CHARS:
            return None
        said = _error(text[start:end])
        if said is None:
            start = end  # whole policies so far: the error is after them
        elif said == message:
            return _token_start(text, start, text.rfind("\n", 0, end - 1) + 1, end, message)
    return None


def _token_start(text: str, start: int, line: int, end: int, message: str) -> int:
    """The offending token's start in the line ``text[line:end]`` of the chunk beginning at ``start``."""
    cut = next((c for c in range(line + 1, end + 1) if _error(text[start:c]) == message), end)
    found = max((_last(text, needle, start, cut) for needle in needles_of(message)), default=-1)
    return found if found != -1 else max(line, cut - 1)


def _alone(needle: str) -> re.Pattern[str]:
    """``needle`` not run into a longer token (``contex`` is not found in ``context``, ``=`` not in ``>=``)."""

    def edge(char: str) -> str:
        return _WORD if re.fullmatch(_WORD, char) else _OPERATOR

    return re.compile(f"(?<!{edge(needle[0])}){re.escape(needle)}(?!{edge(needle[-1])})")


def _last(text: str, needle: str, start: int, cut: int) -> int:
    """Offset of the last lone occurrence of ``needle`` in ``text[start:cut]``; -1: none."""
    found = [m.start() for m in _alone(needle).finditer(text, start, cut)]
    return found[-1] if found else -1


def _first(text: str, needle: str, start: int, end: int) -> int:
    found = _alone(needle).search(text, start, end)
    return found.start() if found else -1


def policy_spans(text: str, needed: int | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the policies of ``text`` in file order (a line holding two spans them both).

    Args:
        text: policies that parse.
        needed: stop once this many are found (``None``: all).
    """
    spans: list[tuple[int, int]] = []
    start, parsed = 0, 0
    for probes, end in enumerate(_line_ends(text, 0)):
        parsed += end - start
        if probes >= MAX_PROBES or parsed > MAX_PARSED_CHARS or (needed is not None and len(spans) >= needed):
            break
        try:
            count = len(cedarpy.PolicySet.from_str(text[start:end]))
        except ValueError:
            continue
        spans += [(start, end)] * count
        start = end
    return spans


def at(text: str, span: tuple[int, int] | None, needle: str | None) -> str | None:
    """``line:column`` of ``needle``'s first occurrence in ``span``, else of the span's first code line."""
    if span is None:
        return None
    code = _first_code(text, span)
    found = _first(text, needle, code, span[1]) if needle else -1
    return position(text, found if found != -1 else code)


def _first_code(text: str, span: tuple[int, int]) -> int:
    offset = span[0]
    for line in text[span[0] : span[1]].splitlines(keepends=True):
        stripped = line.lstrip()
        if stripped and not stripped.startswith("//"):
            return offset + len(line) - len(stripped)
        offset += len(line)
    return span[0]
