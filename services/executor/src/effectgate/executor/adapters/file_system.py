"""The sandboxed ``file_system`` tool: read, list and write files under one root directory.

Containment is decided on resolved real paths: the target is ``os.path.realpath`` of ``root /
path`` (every symlink, at any level, followed; ``..`` applied after), and it must be the root
or lie under it by path components (``Path.is_relative_to``, never a string prefix). Absolute
paths, NUL bytes and the empty path are refused outright.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from effectgate.executor.adapters.file_system_paths import (
    check_argument_names,
    check_name_lengths,
    check_size,
    content_bytes,
    digest,
    from_os_error,
    outside,
    path_argument,
    refuse_hard_link,
    split,
)
from effectgate.executor.effects.binding import Guard
from effectgate.executor.errors import ExecutorError, ToolFailed, ToolRefused

__all__ = ["INLINE_READ_BYTES", "FileSystemTool"]

INLINE_READ_BYTES = 65_536
"""Largest file read on the event loop rather than in a worker thread, bytes (module docstring)."""

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC

Operation = Callable[[dict[str, Any], Guard], dict[str, Any]]


def _unguarded() -> None:
    """The guard of a call that runs on a decision alone: nothing to check."""


class _NotInline(Exception):
    """The file is over :data:`INLINE_READ_BYTES`: read it in a worker thread instead."""


class FileSystemTool:
    """Read, list and write UTF-8 files confined to ``root``.

    Operations and result shapes (``path`` is always relative to the root, POSIX style,
    after symlinks are resolved, ``"."`` for the root itself):

    - ``read {"path"}`` → ``{"path", "content": str, "size_bytes": int, "sha256": hex}``
    - ``list {"path" = "."}`` → ``{"path", "entries": [{"name", "kind", "size_bytes"}]}``,
      sorted by name; ``kind`` is ``file|dir|symlink|other``; ``size_bytes`` is 0 but
      for files; symlinks are reported, not followed.
    - ``write {"path", "content"}`` → ``{"path", "size_bytes", "sha256", "created": bool}``

    Args:
        root: the sandbox directory; resolved once, here.
        max_read_bytes: largest file read, and largest content written, in bytes.
        may_write: asked right before a write takes effect (the ``rename``); when it says
            no (this executor's lease lapsed: another may already have ended the call
            ``uncertain``), nothing is written and the call fails ``lease_lost``.
    """

    def __init__(
        self, root: Path, max_read_bytes: int = 1_048_576, may_write: Callable[[], bool] = lambda: True
    ) -> None:
        self._root = Path(os.path.realpath(root))
        self._max_bytes = max_read_bytes
        self._may_write = may_write
        self._operations: dict[str, Operation] = {
            "read": self._read,
            "list": self._list,
            "write": self._write,
        }

    @property
    def root(self) -> Path:
        """The resolved sandbox root."""
        return self._root

    async def call(self, operation: str, arguments: dict[str, Any], guard: Guard | None = None) -> dict[str, Any]:
        """Run ``operation`` with ``arguments``: a small read on the event loop, the rest in a worker thread.

        ``guard`` (a granted call's content check) is called right before the effect, in the
        worker thread; a guarded read always runs there.

        Returns:
            The operation's result, shaped as in the class docstring.

        Raises:
            ToolRefused: unknown operation, bad argument, path outside the sandbox or a
                hard link (``path_outside_sandbox``), ``not_found``, ``not_a_file``,
                ``not_a_directory``, ``too_large``, ``not_utf8``, or what ``guard`` raises
                (``content_changed``); raised before any effect.
            ToolFailed: the file system failed during the call (``tool_error``).
        """
        run = self._operations.get(operation)
        if run is None:
            raise ToolRefused("unknown_operation", f"file_system has no operation {operation!r}")
        check_argument_names(operation, arguments)
        try:
            if operation == "read" and guard is None:
                return await self._read_where_cheapest(arguments)
            return await asyncio.to_thread(run, arguments, guard or _unguarded)
        except ExecutorError:
            raise
        except OSError as exc:
            raise from_os_error(exc, arguments.get("path")) from exc

    async def _read_where_cheapest(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Read a small file on the event loop, a larger one (checked again from the start) in a thread."""
        try:
            return self._read(arguments, inline_bytes=INLINE_READ_BYTES)
        except _NotInline:
            return await asyncio.to_thread(self._read, arguments)

    def _read(
        self, arguments: dict[str, Any], guard: Guard = _unguarded, inline_bytes: int | None = None
    ) -> dict[str, Any]:
        """Read the file; with ``inline_bytes``, raise :class:`_NotInline` rather than read more than that."""
        rel = self._resolve(arguments, "path")
        guard()
        data = self._read_bytes(rel, inline_bytes)
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolRefused("not_utf8", f"{rel.as_posix()!r} is not UTF-8 text", argument="path") from None
        return {"path": rel.as_posix(), "content": content, **digest(data)}

    def _list(self, arguments: dict[str, Any], guard: Guard) -> dict[str, Any]:
        rel = self._resolve(arguments, "path", default=".")
        guard()
        with self._directory(rel) as dir_fd, os.scandir(dir_fd) as found:
            entries = [_entry(item) for item in found]
        entries.sort(key=lambda entry: str(entry["name"]))
        return {"path": rel.as_posix(), "entries": entries}

    def _write(self, arguments: dict[str, Any], guard: Guard) -> dict[str, Any]:
        rel = self._resolve(arguments, "path")
        data = content_bytes(arguments, self._max_bytes)
        parent, name = split(rel)
        check_name_lengths(rel)  # before any directory is created: a refusal leaves nothing behind
        with self._directory(parent, create=True) as dir_fd:
            created = _replace_at(dir_fd, name, data, rel.as_posix(), self._may_write, guard)
        return {"path": rel.as_posix(), **digest(data), "created": created}

    def _resolve(self, arguments: dict[str, Any], key: str, default: str | None = None) -> PurePosixPath:
        """Return the target's resolved path relative to the root, or refuse."""
        raw = path_argument(arguments, key, default)
        target = Path(os.path.realpath(self._root / raw))
        if not target.is_relative_to(self._root):
            raise outside(key, raw, "resolves outside the sandbox")
        return PurePosixPath(target.relative_to(self._root).as_posix())

    def _read_bytes(self, rel: PurePosixPath, inline_bytes: int | None = None) -> bytes:
        parent, name = split(rel)
        most = self._max_bytes if inline_bytes is None else min(self._max_bytes, inline_bytes)
        with self._directory(parent) as dir_fd, _opened(name, _READ_FLAGS, dir_fd) as fd:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ToolRefused("not_a_file", f"{rel.as_posix()!r} is not a regular file", argument="path")
            refuse_hard_link(info, rel.as_posix())
            check_size(info.st_size, rel, self._max_bytes)
            if info.st_size > most:
                raise _NotInline()
            with open(fd, "rb", closefd=False) as stream:
                data = stream.read(most + 1)
        if len(data) > most and most < self._max_bytes:
            raise _NotInline()  # it grew since the fstat: read it whole in the thread
        check_size(len(data), rel, self._max_bytes)
        return data

    @contextlib.contextmanager
    def _directory(self, rel: PurePosixPath, create: bool = False) -> Iterator[int]:
        """Open ``root/rel`` without following any symlink; yield its descriptor.

        With ``create``, missing directories are made (mode 0o755) on the way down.
        """
        fd = os.open(self._root, _DIR_FLAGS)
        try:
            for part in rel.parts:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                fd, parent = _open_subdir(part, fd), fd
                os.close(parent)
            yield fd
        finally:
            os.close(fd)


def _open_subdir(name: str, dir_fd: int) -> int:
    """Open directory ``name`` in ``dir_fd``; a symlink there (swapped in after the check) is refused."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except NotADirectoryError:
        if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, "symlink in a checked path") from None
        raise


@contextlib.contextmanager
def _opened(name: str, flags: int, dir_fd: int, mode: int = 0o644) -> Iterator[int]:
    fd = os.open(name, flags, mode, dir_fd=dir_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def _replace_at(
    dir_fd: int, name: str, data: bytes, shown: str, may_write: Callable[[], bool], guard: Guard = _unguarded
) -> bool:
    """Atomically make ``name`` (in ``dir_fd``) hold ``data``; True if it did not exist.

    ``guard`` and then ``may_write`` are asked last, right before the ``rename(2)``.

    An existing ``name`` must be a regular file with one link (``shown`` is the path a
    refusal names). ``rename(2)`` replaces the entry, so a hard link's other names would
    keep their content anyway: the refusal is for consistency with ``read`` (a file with
    other names is never touched) and comes before the temporary file exists.
    """
    existing = _lstat_at(dir_fd, name)
    if existing is not None:
        if not stat.S_ISREG(existing.st_mode):
            raise ToolRefused("not_a_file", f"{name!r} exists and is not a regular file", argument="path")
        refuse_hard_link(existing, shown)
    temp = f".effectgate-{secrets.token_hex(8)}.tmp"  # short whatever the name: its length cannot fail
    try:
        with _opened(temp, _TEMP_FLAGS, dir_fd) as fd:
            if existing is not None:
                os.fchmod(fd, stat.S_IMODE(existing.st_mode))
            with open(fd, "wb", closefd=False) as stream:
                stream.write(data)
            os.fsync(fd)
        guard()  # what the approval bound must still be there: the content check closest to the effect
        if not may_write():
            raise ToolFailed("lease_lost", "this executor's lease lapsed before the write: nothing was written")
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)
    return existing is None


def _lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _entry(item: os.DirEntry[str]) -> dict[str, Any]:
    if item.is_symlink():
        kind = "symlink"
    elif item.is_dir(follow_symlinks=False):
        kind = "dir"
    elif item.is_file(follow_symlinks=False):
        kind = "file"
    else:
        kind = "other"
    size = item.stat(follow_symlinks=False).st_size if kind == "file" else 0
    return {"name": item.name, "kind": kind, "size_bytes": size}
