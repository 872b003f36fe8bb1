"""pytest runs forked from a process that already imported what they import, the project's modules excepted.

Every run of the mechanism-removal check used to start a new pytest, and with it seconds of
imports (pytest and its plugins, nats, redis, pydantic, faststream, the MCP SDK, …) that the
run before had done already. Here each run is a child forked from this process, and once a run
has ended this process imports every module that run imported from *outside* the checkout's
sources (the installed distributions: :func:`third_party`). The project's own modules
(``effectgate.*``, the tests, their conftest files) are never imported here, so each child
imports them afresh from disk and sees the removal just written, as a new process would.

A child runs with :data:`QUIET_REWRITE`, in a session of its own (a Ctrl-C reaches only the check, which interrupts the
child once), its stdin is ``/dev/null`` and its stdout and stderr go to a file read when it ends.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from subprocess import PIPE, STDOUT
from typing import NoReturn

import pytest

__all__ = ["QUIET_REWRITE", "WarmPytest", "third_party"]

QUIET_REWRITE = ("-W", "ignore::pytest.PytestAssertRewriteWarning")
"""The installed pytest plugins (pytest-asyncio, anyio, …) are imported before a child's pytest starts,
so it cannot rewrite *their* asserts and would warn (an error here): the tests' own modules are
still rewritten."""


def third_party(root: Path) -> list[str]:
    """The modules imported now whose file is not one of the checkout's sources (its ``.venv`` counts as installed).

    In the order they were first imported (``sys.modules`` keeps it): importing them again in another
    order is not the same (``_asyncio`` imported before ``asyncio`` leaves asyncio with two task registries).
    """
    sources, installed = str(root) + os.sep, str(root / ".venv") + os.sep
    names = []
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) or ""
        if name == "__main__" or name.startswith(("effectgate", "tests", "conftest")):
            continue
        if where.startswith(sources) and not where.startswith(installed):
            continue
        names.append(name)
    return names


def _child(args: list[str], output: str, modules: str) -> NoReturn:
    """Run pytest on ``args`` with fd 1 and 2 on ``output``; list its third-party modules in ``modules``; exit."""
    code = 3
    try:
        os.setsid()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sink, nothing = os.open(output, os.O_WRONLY | os.O_TRUNC), os.open(os.devnull, os.O_RDONLY)
        for fd, onto in ((nothing, 0), (sink, 1), (sink, 2)):
            os.dup2(fd, onto)
        code = int(pytest.main(args))
        Path(modules).write_text("\n".join(third_party(Path.cwd())))
    except BaseException:
        traceback.print_exc()  # into ``output``: what the run printed
        raise
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


class WarmPytest:
    """Runs pytest in forked children, importing in this process what each run imported from outside the checkout."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._warmed: set[str] = set()

    def run(self, args: list[str], timeout_s: float, *, cold: bool = False) -> tuple[int | None, str]:
        """pytest's exit status on ``args`` (``None``: none within ``timeout_s``) and everything it printed.

        ``cold``: in a new ``pytest`` process instead, which imports everything itself.
        """
        if cold:
            return _cold(args, self.root, timeout_s)
        with tempfile.TemporaryDirectory(prefix="mutations-run-") as scratch:
            output, modules = Path(scratch) / "output", Path(scratch) / "modules"
            output.touch()
            sys.stdout.flush()
            sys.stderr.flush()
            gc.collect()
            gc.freeze()  # the warmed modules' objects are not the child's garbage: it collects as a new process does
            pid = os.fork()
            if pid == 0:
                os.chdir(self.root)
                _child([*QUIET_REWRITE, *args], str(output), str(modules))
            status = self._wait(pid, timeout_s)
            if modules.exists():
                self._warm(modules.read_text().split())
            return status, output.read_text(errors="replace")

    def _wait(self, pid: int, timeout_s: float) -> int | None:
        try:
            status = _ended(pid, timeout_s)
        except KeyboardInterrupt:
            _stop(pid)
            raise
        if status is None:
            _stop(pid)
        return status

    def _warm(self, names: list[str]) -> None:
        """Import ``names`` here (each once; one that fails to import is skipped: its child imports it)."""
        for name in names:
            if name not in self._warmed and threading.active_count() == 1:
                self._warmed.add(name)
                with contextlib.suppress(Exception):
                    importlib.import_module(name)


def _ended(pid: int, timeout_s: float) -> int | None:
    """The exit status of child ``pid`` once it ended within ``timeout_s`` seconds, else ``None``."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _stop(pid: int) -> None:
    """Interrupt the child once, so its fixtures stop the servers they started; kill it if that hangs."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    if _ended(pid, 30) is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _cold(args: list[str], root: Path, timeout_s: float) -> tuple[int | None, str]:
    """``.venv/bin/pytest`` on ``args`` in a session of its own, as a new process."""
    command = [str(root / ".venv" / "bin" / "pytest"), *args]
    with subprocess.Popen(command, cwd=root, stdout=PIPE, stderr=STDOUT, text=True, start_new_session=True) as pytest:
        try:
            printed, _ = pytest.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(pytest.pid)
            return None, ""
        except KeyboardInterrupt:
            _stop(pytest.pid)
            raise
    return pytest.returncode, printed
