"""One log line per request a service handles, with what it did and how long it took."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from enum import Enum
from typing import Any

__all__ = ["MAX_VALUE_CHARS", "REQUESTS", "note", "request_scope"]

REQUESTS = logging.getLogger("effectgate.requests")
"""The logger of the request lines (its level can be set on its own)."""

MAX_VALUE_CHARS = 200
"""Longest string value written, characters (a longer one is cut and ends with ``…``)."""


class _Line:
    """What one scope noted so far."""

    __slots__ = ("fields", "scope", "what")

    def __init__(self, scope: dict[str, Any]) -> None:
        self.what: str | None = None
        self.fields: dict[str, Any] = {}
        self.scope = scope


_current: ContextVar[_Line | None] = ContextVar("effectgate_request_line", default=None)
_RECORD_ATTRIBUTES = frozenset({*vars(logging.LogRecord("", 0, "", 0, "", (), None)), "message", "asctime"})
"""Names ``extra=`` may not use (``Logger.makeRecord`` raises): such a field gets a ``_`` appended."""


def _clean(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` without ``None`` values; enums as their values; long strings cut; no record attribute overwritten."""
    clean = {}
    for key, value in fields.items():
        if value is None:
            continue
        if isinstance(value, Enum):
            value = value.value
        if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
            value = value[: MAX_VALUE_CHARS - 1] + "…"
        clean[f"{key}_" if key in _RECORD_ATTRIBUTES else key] = value
    return clean


@contextmanager
def request_scope(**fields: Any) -> Iterator[None]:
    """Collect the notes of the code run under it; write them as one INFO line at the end.

    Args:
        fields: written on the line after the noted ones, when something was noted
            (e.g. ``consumer``, ``method``).
    """
    if not REQUESTS.isEnabledFor(logging.INFO):
        yield
        return
    line, started = _Line(_clean(fields)), time.perf_counter()
    token = _current.set(line)
    try:
        yield
    finally:
        _current.reset(token)
        if line.what is not None:
            duration_ms = round((time.perf_counter() - started) * 1000, 1)
            REQUESTS.info(line.what, extra={**line.fields, **line.scope, "duration_ms": duration_ms})


def note(what: str, **fields: Any) -> None:
    """Record what the current message produced (module doc).

    Args:
        what: the line's message, e.g. ``decision``, ``receipt``, ``approval``.
        fields: names, codes and ids (``request_id``, ``principal``, ``tool``, ``verdict`` …);
            ``None`` values are left out. Never argument values, results or reasons.
    """
    line = _current.get()
    if line is not None:
        line.what = what
        line.fields.update(_clean(fields))
    elif REQUESTS.isEnabledFor(logging.INFO):
        REQUESTS.info(what, extra=_clean(fields))
