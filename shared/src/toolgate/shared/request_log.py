"""One log line per request a service handles, with what it did and how long it took.

The broker edge opens a scope around each message it handles (:class:`~toolgate.shared.handling.DurableWorker`
for stream messages, :func:`~toolgate.shared.service.rpc` for request/reply); the code under it
calls :func:`note` where the service's answer leaves (a decision published, a receipt issued,
an approval event, an audit record appended, a registry reply). When the scope ends, what was
noted is written as one INFO record on the ``toolgate.requests`` logger, its fields as
``extra=`` (keys in JSON, ``key=value`` in text, :mod:`toolgate.shared.logs`), plus
``duration_ms``, the time the service spent on the message::

    2026-11-30T20:00:00.123Z policy INFO decision request_id=r1 principal=a1 tool=file_system
        operation=read verdict=execute reason_code=ok consumer=policy duration_ms=3.1

A scope in which nothing was noted writes nothing (a message that produced no answer, e.g. the
backstop seeing a request that is on its way); the last note of a scope names its line, and its
fields are added to the earlier ones. A note outside any scope (a background sweep) is written
at once. Values are names, codes and ids only: never argument values, results or reasons
(which may carry secrets); a string longer than :data:`MAX_VALUE_CHARS` is cut. When the
``toolgate.requests`` logger is off for INFO, a scope and a note cost a level check.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from enum import Enum
from typing import Any

__all__ = ["MAX_VALUE_CHARS", "REQUESTS", "note", "request_scope"]

REQUESTS = logging.getLogger("toolgate.requests")
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


_current: ContextVar[_Line | None] = ContextVar("toolgate_request_line", default=None)
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
