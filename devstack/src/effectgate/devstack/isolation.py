"""Pytest plugin: no test reads the state of whoever runs the tests."""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["STATE_DIR", "USER_STATE", "guarded_state"]

STATE_DIR = "EFFECTGATE_STATE_DIR"
"""Where the CLI finds ``effectgate up``'s state (credentials, keys, ``nats_url``)."""

USER_STATE = (
    STATE_DIR,
    "EFFECTGATE_CREDENTIALS",
    "EFFECTGATE_PUBLIC_KEYS_DIR",
    "EFFECTGATE_INBOX_PREFIX",
    "AGENT_CREDENTIALS",
    "NATS_URL",
    "REDIS_URL",
)
"""Variables naming a running stack or an identity in it (what ``effectgate up`` tells people to export)."""

_WATCHED_EVENTS = frozenset({"open", "os.mkdir", "os.listdir", "os.scandir"})
_guard: dict[str, str] = {}
"""``path``: the guarded directory, ``session``: the session's state directory (empty outside a session)."""
_hooked: list[bool] = []
_saved: dict[str, str] = {}
_numbers = itertools.count()


def guarded_state() -> str | None:
    """The checkout's ``.effectgate`` directory no test may read while the session runs (``None`` outside one)."""
    return _guard.get("path")


def _refuse_reads(event: str, args: tuple[Any, ...]) -> None:
    """Audit hook: a watched event on a path below the guarded directory raises :class:`PermissionError`."""
    if event not in _WATCHED_EVENTS or not args or not isinstance(args[0], str | bytes | os.PathLike):
        return
    if (guarded := _guard.get("path")) is None:
        return
    name = os.fsdecode(args[0])
    if os.sep not in name:  # one component: may be relative to a dir_fd the event does not carry (rmtree)
        return
    path = os.path.abspath(name)
    if path == guarded or path.startswith(guarded + os.sep):
        raise PermissionError(f"tests never read the checkout's state: {path} ({STATE_DIR} is the test's own)")


def pytest_configure(config: pytest.Config) -> None:
    """Drop the user's variables, point ``EFFECTGATE_STATE_DIR`` at the session's directory, guard the checkout's."""
    kept = ("NATS_URL", "REDIS_URL") if os.environ.get("EFFECTGATE_TEST_SERVERS") == "external" else ()
    for name in USER_STATE:
        if name in os.environ and name not in kept:
            _saved[name] = os.environ.pop(name)
    session = Path(tempfile.mkdtemp(prefix="effectgate-test-state-"))
    os.environ[STATE_DIR] = str(session / "session")
    _guard.update(path=str(Path(config.rootpath) / ".effectgate"), session=str(session))
    if not _hooked:
        sys.addaudithook(_refuse_reads)  # cannot be removed; it does nothing once the guard is cleared
        _hooked.append(True)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Lift the guard and give the user's variables back."""
    session = _guard.get("session")
    _guard.clear()
    os.environ.pop(STATE_DIR, None)
    os.environ.update(_saved)
    if session:
        shutil.rmtree(session, ignore_errors=True)


@pytest.fixture(autouse=True)
def own_state_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This test's ``EFFECTGATE_STATE_DIR``: below the session's directory, not created."""
    path = Path(_guard["session"]) / f"test-{next(_numbers)}"
    monkeypatch.setenv(STATE_DIR, str(path))
    yield path
