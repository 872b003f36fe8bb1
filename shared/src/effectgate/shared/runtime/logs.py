"""How a service writes its log: one line per record on stderr, as text or JSON lines."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any, Literal, TextIO

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from effectgate.contracts.errors import EffectgateError, described

__all__ = ["LogSettings", "TextFormatter", "configure_logging", "described_errors", "fields_of", "json_formatter"]

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""The level names ``EFFECTGATE_LOG_LEVEL`` accepts (any case)."""

_STANDARD = frozenset((*RESERVED_ATTRS, "taskName", "service"))
"""Attributes every record has: anything else on a record is one of its fields."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 controls, line and paragraph separators, bidirectional embeddings, overrides and isolates:
written escaped, so no logged text moves a terminal's cursor or reorders what it shows."""
_PLAIN = re.compile(r"[^\s\"'=\\\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+")
_FRAMEWORK = "faststream"
"""The logger FastStream creates with a handler (and colour formatter) of its own."""
_QUIET = {
    **dict.fromkeys(("httpx", "httpcore", "httpx2", "httpcore2"), logging.WARNING),
    "mcp.client.streamable_http": logging.INFO,
    "mcp.server.streamable_http": logging.WARNING,
}
"""Loggers held at a level: below it they write each request's URL (an MCP upstream's, query and all), or a
line per stateless HTTP request (the MCP surface's ``Terminating session: None``)."""


class LogSettings(BaseSettings):
    """The log format and level, from the environment."""

    model_config = SettingsConfigDict(env_prefix="EFFECTGATE_LOG_", extra="ignore")

    format: Literal["text", "json"] = Field(
        default="text",
        description="``text`` (one plain line per record) or ``json`` (JSON lines). Env: EFFECTGATE_LOG_FORMAT.",
    )
    level: str = Field(
        default="INFO", description=f"Lowest level written, one of {', '.join(LEVELS)}. Env: EFFECTGATE_LOG_LEVEL."
    )

    @field_validator("level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.strip().upper() not in LEVELS:
            raise ValueError(f"must be one of {', '.join(LEVELS)}, not {value!r}")
        return value.strip().upper()


def _utc_time(formatter: logging.Formatter) -> None:
    """Make ``formatter`` write times as ``2026-11-30T20:00:00.123Z`` (UTC, milliseconds)."""
    formatter.converter = time.gmtime
    formatter.default_time_format = "%Y-%m-%dT%H:%M:%S"
    formatter.default_msec_format = "%s.%03dZ"


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields of ``record``: what its call passed as ``extra=``, in order."""
    return {key: value for key, value in record.__dict__.items() if key not in _STANDARD}


def _value(value: Any) -> str:
    """``value`` for ``key=value``: as it is when plain, else JSON-quoted (one line, no control characters)."""
    text = value if isinstance(value, str) else str(value)
    return text if _PLAIN.fullmatch(text) else json.dumps(text)


def _escaped(text: str) -> str:
    r"""``text`` with control characters written escaped (a newline as ``\n``, ESC as ``\x1b``)."""
    return _CONTROL.sub(lambda found: repr(found.group())[1:-1], text)


class TextFormatter(logging.Formatter):
    """``<time> <service> <LEVEL> <message> key=value …``; a traceback on indented lines.

    Args:
        service: the service name written on every line.
    """

    def __init__(self, service: str) -> None:
        super().__init__()
        self._service = service
        _utc_time(self)

    def format(self, record: logging.LogRecord) -> str:
        """One line (plus an indented traceback when the record has one)."""
        head = f"{self.formatTime(record)} {self._service} {record.levelname}"
        origin = "" if record.name.startswith("effectgate") else f" [{record.name}]"
        fields = "".join(f" {key}={_value(value)}" for key, value in fields_of(record).items())
        line = f"{head}{origin} {_escaped(record.getMessage())}{fields}"
        trace = self._trace(record)
        return f"{line}\n{trace}" if trace else line

    def _trace(self, record: logging.LogRecord) -> str:
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        text = "\n".join(filter(None, (record.exc_text, record.stack_info)))
        return "\n".join(f"    {line}" for line in text.splitlines() if line.strip())


def json_formatter(service: str) -> JsonFormatter:
    """JSON lines: ``time``, ``service``, ``level``, ``logger``, ``message``, then the record's fields."""
    formatter = JsonFormatter(
        ["asctime", "levelname", "name", "message"],
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        static_fields={"service": service},
        reserved_attrs=sorted(_STANDARD),
    )
    _utc_time(formatter)
    return formatter


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the ``sys.stderr`` of the moment (a test's capture, then the real one again)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _: TextIO) -> None:
        pass


_CONVERSION = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?([a-zA-Z%])")
"""One ``%`` conversion of a log message (``printf``-style, as :mod:`logging` formats it)."""


def described_errors(record: logging.LogRecord) -> bool:
    """Write an error whose text is empty, given as a ``%s`` argument, as what it means (never as nothing).

    A filter (it changes ``record.args`` in place and keeps the record): on the service's
    handler, and run first by every filter that formats the message itself (the scrubber).
    """
    args = record.args
    if not isinstance(args, tuple) or not any(_empty_error(arg) for arg in args):
        return True
    kinds = [found[1] for found in _CONVERSION.finditer(str(record.msg)) if found[1] != "%"]
    record.args = tuple(
        described(arg) if isinstance(arg, BaseException) and index < len(kinds) and kinds[index] == "s" else arg
        for index, arg in enumerate(args)
    )
    return True


def _empty_error(value: object) -> bool:
    return isinstance(value, BaseException) and not str(value).strip()


def _has_text(record: logging.LogRecord) -> bool:
    """A record with no message and no traceback writes nothing (no empty line)."""
    return bool(record.exc_info or record.stack_info or record.getMessage().strip())


def _from_environment() -> LogSettings:
    """The settings from the environment, or a refusal naming each variable that is wrong."""
    try:
        return LogSettings()
    except ValidationError as error:
        problems = [f"EFFECTGATE_LOG_{str(e['loc'][0]).upper()}: {e['msg']}" for e in error.errors()]
        raise EffectgateError("log_settings_invalid", "; ".join(problems)) from None


def configure_logging(service: str, settings: LogSettings | None = None) -> logging.Handler:
    """Write every log record of this process to stderr in the configured format.

    Idempotent: a second call replaces the handler the first one installed (handlers others
    installed, e.g. a test's, stay). FastStream's own loggers lose their colour handlers and
    write through this one. The ``httpx``, ``httpcore``, ``httpx2`` and ``httpcore2`` loggers are set to WARNING, and
    ``mcp.client.streamable_http`` to INFO (their lower records carry URLs).

    Args:
        service: written on every line (``service`` key in JSON).
        settings: the format and level; from the environment when ``None``.

    Returns:
        The installed handler.

    Raises:
        EffectgateError: ``log_settings_invalid``: ``EFFECTGATE_LOG_FORMAT`` or ``EFFECTGATE_LOG_LEVEL``
            has a value it does not know (the reason names the setting and the values allowed).
    """
    settings = settings or _from_environment()
    handler = _Stderr()
    handler.set_name("effectgate")
    handler.setFormatter(TextFormatter(service) if settings.format == "text" else json_formatter(service))
    handler.addFilter(described_errors)
    handler.addFilter(_has_text)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "effectgate"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.level)
    framework = logging.getLogger(_FRAMEWORK)
    framework.handlers.clear()
    framework.propagate = True
    for name, level in _QUIET.items():
        logging.getLogger(name).setLevel(level)
    return handler
