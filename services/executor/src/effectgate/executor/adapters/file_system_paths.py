"""What a ``file_system`` call may name, and what its refusals say: checks made before any effect."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import PurePosixPath
from typing import Any

from effectgate.executor.errors import ExecutorError, ToolFailed, ToolRefused

__all__ = [
    "MAX_PATH_CHARS",
    "NAME_MAX_BYTES",
    "check_argument_names",
    "check_name_lengths",
    "check_size",
    "content_bytes",
    "digest",
    "from_os_error",
    "outside",
    "path_argument",
    "refuse_hard_link",
    "split",
]

MAX_PATH_CHARS = 1024
"""Longest ``path`` argument accepted, in characters (the descriptor's ``maxLength``)."""


_ALLOWED = {"read": {"path"}, "list": {"path"}, "write": {"path", "content"}}

_REFUSALS = {
    errno.ENOENT: ("not_found", "no such file or directory"),
    errno.ENOTDIR: ("not_a_directory", "a component of 'path' is not a directory"),
    errno.EISDIR: ("not_a_file", "'path' is a directory"),
    errno.ELOOP: ("path_outside_sandbox", "'path' is a symlink, a symlink loop, or became one during the call"),
    errno.ENAMETOOLONG: ("invalid_argument", "a component of 'path' is too long"),
}
"""errno of a failed call → (reason_code, reason) of the refusal it means."""


def check_argument_names(operation: str, arguments: dict[str, Any]) -> None:
    """Refuse arguments that are not an object, or name an argument ``operation`` does not take."""
    if not isinstance(arguments, dict):
        raise ToolRefused("invalid_argument", "arguments must be an object")
    unknown = sorted(set(arguments) - _ALLOWED[operation])
    if unknown:
        raise ToolRefused("invalid_argument", f"unknown argument {unknown[0]!r}", argument=str(unknown[0]))


def path_argument(arguments: dict[str, Any], key: str, default: str | None) -> str:
    """Return the raw path argument, refusing what can never name a file in the sandbox."""
    raw = arguments.get(key, default)
    if not isinstance(raw, str):
        raise ToolRefused("invalid_argument", f"{key!r} must be a string", argument=key)
    if len(raw) > MAX_PATH_CHARS:
        raise ToolRefused("invalid_argument", f"{key!r} is over {MAX_PATH_CHARS} characters", argument=key)
    if raw == "":
        raise outside(key, raw, "is empty")
    if "\x00" in raw:
        raise outside(key, raw, "contains a NUL byte")
    if os.path.isabs(raw):
        raise outside(key, raw, "is absolute; paths are relative to the sandbox root")
    return raw


def outside(key: str, raw: str, why: str) -> ToolRefused:
    """The ``path_outside_sandbox`` refusal of argument ``key`` (``raw``, cut to 120 characters), saying ``why``."""
    return ToolRefused("path_outside_sandbox", f"{key!r} {raw[:120]!r} {why}", argument=key)


NAME_MAX_BYTES = 255
"""Longest file name component, bytes (POSIX ``NAME_MAX`` on Linux file systems)."""


def check_name_lengths(rel: PurePosixPath) -> None:
    """Refuse a path with a component longer than :data:`NAME_MAX_BYTES` (UTF-8) before any effect."""
    for part in rel.parts:
        if len(part.encode("utf-8", "surrogateescape")) > NAME_MAX_BYTES:
            reason = f"a component of 'path' is over {NAME_MAX_BYTES} bytes: {part[:40]!r}…"
            raise ToolRefused("invalid_argument", reason, argument="path")


def split(rel: PurePosixPath) -> tuple[PurePosixPath, str]:
    """Split into (parent directory, file name); the root itself names no file."""
    if not rel.parts:
        raise ToolRefused("not_a_file", "'path' names the sandbox root, not a file", argument="path")
    return rel.parent, rel.name


def refuse_hard_link(info: os.stat_result, shown: str) -> None:
    """Refuse a regular file with other names: they may lie outside the sandbox (:mod:`.file_system`).

    Raises:
        ToolRefused: ``path_outside_sandbox``, naming ``shown`` and the link count.
    """
    if info.st_nlink > 1:
        why = f"is a hard link with {info.st_nlink} links; a file with other names is refused"
        raise ToolRefused("path_outside_sandbox", f"'path' {shown[:120]!r} {why}", argument="path")


def digest(data: bytes) -> dict[str, Any]:
    """``{"size_bytes", "sha256"}`` of ``data`` (the digest in hex)."""
    return {"size_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def from_os_error(exc: OSError, path: object = None) -> ExecutorError:
    """Map a file-system error to a refusal (the request's fault) or a failure, naming the agent's path."""
    if exc.errno in _REFUSALS:
        code, reason = _REFUSALS[exc.errno]
        return ToolRefused(code, f"{reason}: {path!r}" if isinstance(path, str) else reason, argument="path")
    return ToolFailed("tool_error", f"file system error: {exc.strerror or type(exc).__name__}")


def content_bytes(arguments: dict[str, Any], max_bytes: int) -> bytes:
    """The UTF-8 bytes of a write's ``content``; refused unless a string of at most ``max_bytes`` bytes."""
    content = arguments.get("content")
    if not isinstance(content, str):
        raise ToolRefused("invalid_argument", "'content' must be a string", argument="content")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolRefused("invalid_argument", "'content' is not valid Unicode", argument="content") from None
    if len(data) > max_bytes:
        raise ToolRefused("too_large", f"'content' is over {max_bytes} bytes", argument="content")
    return data


def check_size(size_bytes: int, rel: PurePosixPath, max_bytes: int) -> None:
    """Refuse (``too_large``) a file at ``rel`` of more than ``max_bytes`` bytes."""
    if size_bytes > max_bytes:
        raise ToolRefused("too_large", f"{rel.as_posix()!r} is over {max_bytes} bytes", argument="path")
