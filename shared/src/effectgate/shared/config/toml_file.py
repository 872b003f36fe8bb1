"""Reading a TOML configuration file (``effectgate.toml``, an MCP servers file) within fixed bounds.

What cannot be a configuration file is refused before it is read whole, each with one line
naming the file: a path that is no regular file (a directory, ``/dev/zero``, a FIFO), a file
over :data:`MAX_CONFIG_BYTES`, text that is not UTF-8 or not TOML, and values nested deeper
than :data:`MAX_CONFIG_DEPTH`.
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from effectgate.contracts.errors import Problem

__all__ = ["MAX_CONFIG_BYTES", "MAX_CONFIG_DEPTH", "ConfigInvalid", "absolute", "read_toml"]

MAX_CONFIG_BYTES = 1024 * 1024
"""The largest configuration file read, in bytes (1 MiB); a larger one is refused unread."""

MAX_CONFIG_DEPTH = 64
"""The deepest nesting of tables and arrays a configuration file may have (the top level is 1)."""

_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)
"""What a path that is no regular file is, as named in the refusal."""


class ConfigInvalid(Problem, ValueError):
    """A configuration file cannot be used.

    Attributes:
        problems: one line per problem, each ``<file>: <key path>: <what is wrong>``.
    """

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def absolute(path: Path) -> Path:
    """``path`` made absolute against the working directory, its symlinks kept (``os.path.abspath``).

    Every configured path is made absolute this way, never with ``Path.resolve``: a
    virtualenv's ``bin/python`` is a symlink to the base interpreter, and the interpreter
    finds its virtualenv (``pyvenv.cfg``) from the path it was started by. ``..`` is
    removed lexically, as ``os.path.abspath`` does.
    """
    return Path(os.path.abspath(path))


def read_toml(path: Path) -> dict[str, Any]:
    """The TOML document in the file at ``path``.

    Raises:
        ConfigInvalid: one problem naming the file: it cannot be opened or read, is no
            regular file, is over :data:`MAX_CONFIG_BYTES`, is not UTF-8, is not TOML, or
            nests deeper than :data:`MAX_CONFIG_DEPTH`.
    """
    try:
        text = _read(path).decode("utf-8")
        document = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigInvalid([f"{path.name}: invalid TOML: {exc}"]) from exc
    except RecursionError:
        raise _too_deep(path) from None
    if _depth(document) > MAX_CONFIG_DEPTH:
        raise _too_deep(path)
    return document


def _read(path: Path) -> bytes:
    """At most :data:`MAX_CONFIG_BYTES` of the regular file at ``path`` (opened without blocking on a FIFO)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            _check_kind(path, os.fstat(descriptor))
            data = _read_up_to(descriptor, MAX_CONFIG_BYTES + 1)
        finally:
            os.close(descriptor)
    except OSError as exc:
        where = "" if path.is_absolute() else f" (looked for {path.absolute()})"
        raise ConfigInvalid([f"{path}: cannot be read: {exc.strerror or exc}{where}"]) from exc
    if len(data) > MAX_CONFIG_BYTES:
        raise _too_large(path)
    return data


def _read_up_to(descriptor: int, limit: int) -> bytes:
    """The bytes of open file ``descriptor`` up to its end or ``limit``, whichever comes first."""
    chunks: list[bytes] = []
    size = 0
    while size < limit and (chunk := os.read(descriptor, limit - size)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _check_kind(path: Path, status: os.stat_result) -> None:
    """Refuse what is no regular file, or one larger than the limit, before reading it."""
    if not stat.S_ISREG(status.st_mode):
        kind = next((name for test, name in _KINDS if test(status.st_mode)), "something else")
        raise ConfigInvalid([f"{path}: not a regular file ({kind}); name a TOML file"])
    if status.st_size > MAX_CONFIG_BYTES:
        raise _too_large(path)


def _too_large(path: Path) -> ConfigInvalid:
    return ConfigInvalid([f"{path}: larger than {MAX_CONFIG_BYTES} bytes (1 MiB), the limit for a configuration file"])


def _too_deep(path: Path) -> ConfigInvalid:
    return ConfigInvalid([f"{path.name}: tables or arrays nested more than {MAX_CONFIG_DEPTH} levels deep"])


def _depth(document: dict[str, Any]) -> int:
    """How deeply ``document`` nests tables and arrays (walked without recursion)."""
    deepest = 0
    pending: list[tuple[dict[str, Any] | list[Any], int]] = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        deepest = max(deepest, depth)
        children = value.values() if isinstance(value, dict) else value
        pending += [(child, depth + 1) for child in children if isinstance(child, dict | list)]
    return deepest
