"""Pytest plugin: no process a test session started outlives it, however the session ends."""

from __future__ import annotations

import signal
import subprocess
from types import FrameType
from typing import Any

import pytest

from effectgate.shared.runtime.lifetime import die_with_parent

__all__ = ["OwnedPopen"]

_PREEXEC_POSITION = 6
"""Where ``preexec_fn`` sits among :class:`subprocess.Popen`'s positional parameters."""

_original_popen = subprocess.Popen


class OwnedPopen(subprocess.Popen):  # type: ignore[type-arg]
    """:class:`subprocess.Popen` whose child gets the parent-death signal unless given a ``preexec_fn``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) <= _PREEXEC_POSITION and kwargs.get("preexec_fn") is None:
            kwargs["preexec_fn"] = die_with_parent()
        super().__init__(*args, **kwargs)


def _interrupt(number: int, frame: FrameType | None) -> None:
    """SIGTERM: end the session as Ctrl-C does (teardown runs); a second SIGTERM ends the process at once."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise KeyboardInterrupt(f"ended by {signal.Signals(number).name}")


def pytest_configure(config: pytest.Config) -> None:
    """Start every process of the session with the parent-death signal; SIGTERM tears the session down."""
    subprocess.Popen = OwnedPopen  # type: ignore[misc]
    signal.signal(signal.SIGTERM, _interrupt)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Start processes as before the session."""
    subprocess.Popen = _original_popen  # type: ignore[misc]
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
