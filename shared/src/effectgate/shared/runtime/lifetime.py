"""Child processes that end with the process that started them, however it ends."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

__all__ = ["PARENT_DEATH_SIGNAL", "bound_command", "die_with_parent"]

PARENT_DEATH_SIGNAL = signal.SIGKILL
"""What a child gets when its parent ends: nothing it could ignore or hang in."""

_PR_SET_PDEATHSIG = 1
"""``<linux/prctl.h>``."""

_HELPER = """
import ctypes, os, sys
sig, parent, command = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
ctypes.CDLL(None, use_errno=True).prctl(1, sig, 0, 0, 0)
if os.getppid() != parent:
    sys.exit(1)
try:
    os.execvp(command[0], command)
except OSError as error:
    print(f"cannot run {command[0]!r}: {error.strerror}", file=sys.stderr)
    sys.exit(127)
"""
"""Run as ``python -c _HELPER <signal> <parent pid> <command> <args…>``."""


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    function: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    return function


def die_with_parent(sig: signal.Signals = PARENT_DEATH_SIGNAL) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child receive ``sig`` when the calling process (thread) ends.

    Made in the parent (which resolves ``prctl`` there), so the child only calls it. A child
    whose parent already ended before the call exits at once.
    """
    prctl, parent = _prctl(), os.getpid()

    def preexec() -> None:
        if prctl is None:
            return
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def bound_command(command: str, args: list[str]) -> tuple[str, list[str]]:
    """``(command, args)`` run through the helper, so the process ends with its parent.

    Unchanged elsewhere than Linux and for a command that is no executable file (the
    launcher then reports it as before, nothing having started).
    """
    if _prctl() is None or not (os.path.isfile(command) and os.access(command, os.X_OK)):
        return command, args
    helper = ["-I", "-S", "-c", _HELPER, str(int(PARENT_DEATH_SIGNAL)), str(os.getpid()), command, *args]
    return sys.executable, helper
