"""The output file: JSON lines in stream order, each durable before its record is acked.

Idempotent by stream sequence: on open, a torn last line (a crash inside a write; its record
was never acked) is cut off, and the sequence of the last whole line is where the file stands.
A record redelivered at or below it is already written: it is acked, not written again.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from siem_forwarder.records import Line

__all__ = ["Output"]

_CHUNK = 65_536
_encoder = msgspec.json.Encoder()


class _Seq(msgspec.Struct):
    seq: int


def _whole_end(fd: int, end: int) -> int:
    """The end of the last whole (newline-terminated) line at or before ``end``; 0 when there is none."""
    while end > 0:
        start = max(0, end - _CHUNK)
        found = os.pread(fd, end - start, start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


class Output:
    """An append-only JSON lines file, opened where it stopped.

    Args:
        path: the file (created when missing, mode 0600).

    Raises:
        OSError: it cannot be opened; msgspec.DecodeError: its last line is not one of ours.
    """

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        end = _whole_end(self._fd, os.fstat(self._fd).st_size)
        os.ftruncate(self._fd, end)
        os.fsync(self._fd)
        last = os.pread(self._fd, end - (start := _whole_end(self._fd, end - 1)), start) if end else b""
        self.last = msgspec.json.decode(last, type=_Seq).seq if last else 0
        """The stream sequence of the last line written (0: none)."""

    def write(self, line: Line) -> None:
        """Append ``line``, then flush and fsync: when this returns, the line survives a crash."""
        data = _encoder.encode(line) + b"\n"
        while data:
            data = data[os.write(self._fd, data) :]
        os.fsync(self._fd)
        self.last = line.seq

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)
