"""Two stacks never share one state directory (they would corrupt one JetStream store)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from effectgate.cli.stack.launch import _only_stack_on


def test_a_second_stack_on_the_same_state_directory_is_refused(tmp_path: Path) -> None:
    refused = pytest.raises(RuntimeError, match=f"already running on {tmp_path} \\(pid {os.getpid()}\\): stop it first")
    with _only_stack_on(tmp_path), refused, _only_stack_on(tmp_path):
        pass
    with _only_stack_on(tmp_path):  # released: the next one may start
        pass
