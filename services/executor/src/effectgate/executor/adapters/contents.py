"""Reading what a call's file references name (:mod:`effectgate.contracts.tools.contents`), under the tool's file root.

Roots by adapter: ``file_system`` → the sandbox; ``mcp:<server>`` → the server's
``file_root``; any other adapter, or a server without one → every reference ``unseen``.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Final

from effectgate.contracts.tools.contents import MAX_REFERENCES, ContentKind, ContentState
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.file_references import Reference, file_references

__all__ = ["CALL_MAX_BYTES", "CONTENT_MAX_BYTES", "ContentReader", "content_roots"]

CONTENT_MAX_BYTES: Final = 16_777_216
"""Largest file whose content is read and bound, bytes (a larger one binds the reference only)."""

CALL_MAX_BYTES: Final = 67_108_864
"""Most bytes read for one call's references, bytes; a file that would go past binds the reference only."""

_CHUNK = 1_048_576
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC


def content_roots(sandbox: Path, mcp_roots: Mapping[str, str]) -> dict[str, Path]:
    """Adapter → file root: ``file_system`` the sandbox, ``mcp:<server>`` each server's non-empty ``file_root``."""
    roots = {"file_system": sandbox}
    roots.update({f"mcp:{server}": Path(root) for server, root in mcp_roots.items() if root})
    return roots


class ContentReader:
    """Reads the states of a call's file references.

    Args:
        roots: adapter (``file_system``, ``mcp:<server>``) → its file root; resolved once, here.
        max_bytes: largest file hashed, bytes.
        call_max_bytes: most bytes hashed for one call, bytes.
    """

    def __init__(
        self, roots: Mapping[str, Path], max_bytes: int = CONTENT_MAX_BYTES, call_max_bytes: int = CALL_MAX_BYTES
    ) -> None:
        self._roots = {adapter: Path(os.path.realpath(root)) for adapter, root in roots.items()}
        self._max_bytes, self._call_max_bytes = max_bytes, call_max_bytes

    def read(self, descriptor: ToolDescriptor, operation: str, arguments: dict[str, Any]) -> tuple[ContentState, ...]:
        """One state per file reference of ``operation``'s ``arguments``, in reference order (blocking).

        Only the first :data:`~effectgate.contracts.tools.contents.MAX_REFERENCES` are read; the rest
        are ``other`` (the reference only). An unknown operation names no file.

        Raises:
            SchemaUnusable: the input schema holds a file marker where none can be.
        """
        spec = descriptor.operations.get(operation)
        if spec is None:
            return ()
        references = file_references(spec.input_schema, arguments)
        root, budget = self._roots.get(descriptor.adapter), [self._call_max_bytes]
        states = [self._state(root, ref, descriptor.adapter, budget) for ref in references[:MAX_REFERENCES]]
        beyond = f"beyond the first {MAX_REFERENCES} references: not read"
        states += [_state(reference, ContentKind.OTHER, note=beyond) for reference in references[MAX_REFERENCES:]]
        return tuple(states)

    def _state(self, root: Path | None, reference: Reference, adapter: str, budget: list[int]) -> ContentState:
        if root is None:
            return _state(reference, ContentKind.UNSEEN, note=f"the executor cannot see the files of {adapter}")
        if not reference.path or "\x00" in reference.path:
            return _state(reference, ContentKind.OTHER, note="not a path")
        rel = _inside(root, reference.path)
        if rel is None:
            return _state(reference, ContentKind.OTHER, note="outside the file root")
        try:
            return self._read(root, rel, reference, budget)
        except (FileNotFoundError, NotADirectoryError):
            return _state(reference, ContentKind.ABSENT)
        except OSError as error:
            why = "a symlink" if error.errno == errno.ELOOP else f"unreadable ({error.strerror or 'error'})"
            return _state(reference, ContentKind.OTHER, note=why)

    def _read(self, root: Path, rel: PurePosixPath, reference: Reference, budget: list[int]) -> ContentState:
        if not rel.parts:
            return _state(reference, ContentKind.DIRECTORY)
        parent = os.open(root, _DIR_FLAGS)
        try:
            for part in rel.parts[:-1]:
                parent, above = os.open(part, _DIR_FLAGS, dir_fd=parent), parent
                os.close(above)
            return self._entry(parent, rel.name, reference, budget)
        finally:
            os.close(parent)

    def _entry(self, parent: int, name: str, reference: Reference, budget: list[int]) -> ContentState:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            return _state(reference, ContentKind.DIRECTORY)
        if not stat.S_ISREG(info.st_mode):
            note = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
            return _state(reference, ContentKind.OTHER, note=note)
        fd = os.open(name, _READ_FLAGS, dir_fd=parent)
        try:
            return self._hashed(fd, reference, budget)
        finally:
            os.close(fd)

    def _hashed(self, fd: int, reference: Reference, budget: list[int]) -> ContentState:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return _state(reference, ContentKind.OTHER, note="not a regular file")
        most = min(self._max_bytes, budget[0])
        digest, size = hashlib.sha256(), 0
        while chunk := os.read(fd, _CHUNK):
            size += len(chunk)
            if size > most:
                return _state(reference, ContentKind.OTHER, note=self._too_large(most))
            digest.update(chunk)
        budget[0] -= size
        return _state(reference, ContentKind.FILE, sha256=f"sha256:{digest.hexdigest()}", size_bytes=size)

    def _too_large(self, most: int) -> str:
        if most < self._max_bytes:
            return f"not read: the call's files are over {self._call_max_bytes} bytes in all"
        return f"over {self._max_bytes} bytes: not read"


def _inside(root: Path, raw: str) -> PurePosixPath | None:
    """``raw`` resolved against ``root`` (every symlink followed), relative to it; ``None`` when outside."""
    try:
        target = Path(os.path.realpath(root / raw))
    except (OSError, ValueError):
        return None
    if not target.is_relative_to(root):
        return None
    return PurePosixPath(target.relative_to(root).as_posix())


def _state(reference: Reference, kind: ContentKind, **fields: Any) -> ContentState:
    return ContentState(pointer=reference.pointer, path=reference.path or "", kind=kind, **fields)
