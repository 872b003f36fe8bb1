"""The justfile hands ./dev the arguments as they were typed, quoting kept.

Runs the real ``just`` (the ``rust-just`` dev dependency) on a copy of the justfile next to
a stand-in ``./dev`` that prints each argument it receives on its own line.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JUST = Path(sys.executable).parent / "just"
ECHO_DEV = '#!/bin/sh\nfor arg in "$@"; do printf "<%s>\\n" "$arg"; done\n'


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "justfile", tmp_path / "justfile")
    dev = tmp_path / "dev"
    dev.write_text(ECHO_DEV)
    dev.chmod(0o755)
    return tmp_path


def received(folder: Path, *args: str) -> list[str]:
    run = subprocess.run([str(JUST), *args], cwd=folder, capture_output=True, text=True, timeout=30, check=True)
    return run.stdout.splitlines()


@pytest.mark.parametrize("recipe", ["test", "demo", "up", "bench"])
def test_a_quoted_argument_arrives_as_one(stand_in: Path, recipe: str) -> None:
    assert received(stand_in, recipe, "-k", "a or b") == [f"<{recipe}>", "<-k>", "<a or b>"]


def test_shell_characters_arrive_as_typed(stand_in: Path) -> None:
    assert received(stand_in, "test", "-k", "x; echo $HOME 'q'") == ["<test>", "<-k>", "<x; echo $HOME 'q'>"]


def test_no_arguments_pass_none(stand_in: Path) -> None:
    assert received(stand_in, "test") == ["<test>"]
