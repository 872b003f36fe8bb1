"""An MCP server's stderr as log records: one record per line, and its last words kept for a reason."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable
from typing import TextIO

__all__ = ["LAST_WORDS_CHARS", "last_words", "scrub_with", "stderr_logged"]

LAST_WORDS_CHARS = 300
"""Longest last line kept from a server's stderr, characters."""

_scrub: Callable[[str], str] = str
"""Applied to a whole line before its last words are kept (:func:`scrub_with`)."""


def scrub_with(scrub: Callable[[str], str]) -> None:
    """Scrub each whole stderr line with ``scrub`` before its last words are kept (process-wide).

    A secret must be replaced while it is whole: clipped first, its tail would no longer
    be recognised. The executor and the registry install their redactor's ``text``.
    """
    global _scrub
    _scrub = scrub


@contextlib.asynccontextmanager
async def stderr_logged(
    name: str, tail: list[str], logger: logging.Logger, level: int = logging.INFO
) -> AsyncIterator[tuple[TextIO, threading.Thread]]:
    """``(pipe, thread)``: a pipe for server ``name``'s stderr whose lines the thread logs at ``level``.

    ``tail[0]`` is kept as the last non-empty line (:func:`last_words`). The parent's write
    end is closed on exit; the thread ends at EOF, once the server is gone (join it before
    reading ``tail`` for a server that just exited).
    """
    read_fd, write_fd = os.pipe()
    thread = threading.Thread(
        target=_log_lines, args=(read_fd, name, tail, logger, level), daemon=True, name=f"mcp-stderr-{name}"
    )
    thread.start()
    with os.fdopen(write_fd, "w") as errlog:
        yield errlog, thread


def last_words(line: str, limit: int = LAST_WORDS_CHARS) -> str:
    """``line`` stripped; when longer than ``limit``, its end from a word boundary, after ``…``."""
    line = line.strip()
    if len(line) <= limit:
        return line
    end = line[-(limit - 1) :]
    head, space, rest = end.partition(" ")
    return "…" + (rest if space and rest else end)


def _log_lines(fd: int, name: str, tail: list[str], logger: logging.Logger, level: int) -> None:
    with os.fdopen(fd, "rb") as pipe:
        for raw in pipe:
            line = raw.decode("utf-8", "replace").rstrip()
            logger.log(level, "MCP server %r stderr: %s", name, line)
            if line.strip():
                tail[0] = last_words(_scrub(line))
