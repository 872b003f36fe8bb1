"""Watching processes from ``/proc`` (Linux, for tests): who descends from whom, and whether one still runs."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

__all__ = ["Identity", "command_line", "descendants", "group_runs", "identity", "runs", "survivors"]

Identity = tuple[int, str]
"""A process: its pid and its start time (``/proc/<pid>/stat`` field 22), so a reused pid is another one."""


def _stat(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name: state, ppid, …; ``None`` when there is no such process."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def identity(pid: int) -> Identity:
    """The :data:`Identity` of running process ``pid``."""
    fields = _stat(pid)
    assert fields is not None, f"no process {pid}"
    return pid, fields[19]


def runs(process: Identity) -> bool:
    """Whether ``process`` exists and is no zombie (a zombie has ended: only its parent has not reaped it)."""
    fields = _stat(process[0])
    return fields is not None and fields[19] == process[1] and fields[0] != "Z"


def group_runs(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies have ended)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            state, _, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
            if group == str(pgid) and state != "Z":
                return True
    return False


def descendants(root: int) -> set[Identity]:
    """Every running process below ``root``."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), list(children.get(root, []))
    while todo:
        pid = todo.pop()
        with contextlib.suppress(AssertionError):
            found.add(identity(pid))
        todo += children.get(pid, [])
    return {process for process in found if runs(process)}


def survivors(processes: set[Identity], timeout_s: float = 15.0) -> set[Identity]:
    """Those of ``processes`` still running after ``timeout_s`` seconds (returns early once none runs)."""
    deadline = time.monotonic() + timeout_s
    while (left := {process for process in processes if runs(process)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def command_line(process: Identity) -> str:
    """What ``process`` runs (for messages)."""
    with contextlib.suppress(OSError):
        return (Path("/proc") / str(process[0]) / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    return "?"
