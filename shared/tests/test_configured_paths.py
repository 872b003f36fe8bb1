"""Configured paths are made absolute against their file's directory with their symlinks kept.

A virtualenv's ``bin/python`` is a symlink to the base interpreter: the interpreter finds its
virtualenv (``pyvenv.cfg``) from the path it was started by, so a path resolved through the
symlink runs outside the virtualenv, without its packages.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from effectgate.shared.config.effectgate_file import load_config
from effectgate.shared.config.toml_file import absolute
from effectgate.shared.mcp.loading import load_mcp_servers, resolve_command
from effectgate.shared.mcp.servers import stdio_launch

BASE_PYTHON = os.path.realpath(sys.executable)


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A virtualenv-like layout: ``venv/bin/python`` a symlink to the base interpreter, ``venv/pyvenv.cfg`` beside."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(BASE_PYTHON)
    cfg = f"home = {os.path.dirname(BASE_PYTHON)}\ninclude-system-site-packages = false\n"
    (tmp_path / "venv" / "pyvenv.cfg").write_text(cfg)
    (tmp_path / "conf").mkdir()
    return tmp_path / "venv"


def prefix_of(command: str, *launched_as: str) -> str:
    """``sys.prefix`` of the interpreter started as ``command`` (``launched_as``: the launch's args first).

    That is the virtualenv it runs in.
    """
    argv = [command, *launched_as, "-c", "import sys; print(sys.prefix)"]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def launched_prefix(server: Any) -> str:
    """``sys.prefix`` of the interpreter the server's stdio launch runs (through any launch helper)."""
    launch = stdio_launch(server)
    return prefix_of(launch["command"], *launch["args"])


def test_the_layout_is_a_virtualenv_only_through_its_own_path(venv: Path) -> None:
    assert prefix_of(str(venv / "bin" / "python")) == str(venv)
    assert prefix_of(BASE_PYTHON) != str(venv)


def test_a_relative_command_runs_inside_the_virtualenv_it_names(venv: Path) -> None:
    file = venv.parent / "conf" / "mcp.toml"
    file.write_text('[servers.mine]\ncommand = "../venv/bin/python"\n')

    server = load_mcp_servers(file)["mine"]

    assert server.command == str(venv / "bin" / "python")
    assert launched_prefix(server) == str(venv)


def test_the_relative_and_the_absolute_spelling_run_the_same_interpreter(venv: Path) -> None:
    file = venv.parent / "conf" / "mcp.toml"
    file.write_text(f'[servers.rel]\ncommand = "../venv/bin/python"\n[servers.abs]\ncommand = "{venv}/bin/python"\n')

    servers = load_mcp_servers(file)

    assert servers["rel"].command == servers["abs"].command
    assert prefix_of(servers["rel"].command) == prefix_of(servers["abs"].command) == str(venv)


def test_a_effectgate_toml_command_keeps_the_virtualenv_too(venv: Path) -> None:
    file = venv.parent / "conf" / "effectgate.toml"
    file.write_text('[mcp.servers.mine]\ncommand = "../venv/bin/python"\n')

    server = load_config(file).mcp.servers["mine"]

    assert prefix_of(server.command) == str(venv)


def test_a_command_relative_to_the_working_directory_keeps_its_symlink(
    venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(venv.parent / "conf")

    assert resolve_command("../venv/bin/python") == str(venv / "bin" / "python")


def test_a_symlinked_cwd_is_kept_as_written(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    file = tmp_path / "mcp.toml"
    file.write_text(f'[servers.mine]\ncommand = "{sys.executable}"\ncwd = "link"\n')

    assert load_mcp_servers(file)["mine"].cwd == str(tmp_path / "link")


def test_the_config_file_and_its_directories_keep_a_symlinked_directory(tmp_path: Path) -> None:
    (tmp_path / "real" / "tools").mkdir(parents=True)
    (tmp_path / "deploy").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "effectgate.toml").write_text(
        '[tools]\ndescriptor_dirs = ["tools"]\n[chat]\nmatrix_password_file = "pw"\n'
    )

    config = load_config(tmp_path / "deploy" / "effectgate.toml")

    assert config.path == tmp_path / "deploy" / "effectgate.toml"
    assert config.descriptor_dirs() == [tmp_path / "deploy" / "tools"]
    assert config.chat_settings()["matrix_password_file"] == str(tmp_path / "deploy" / "pw")


def test_a_relative_config_path_is_made_absolute_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "effectgate.toml").write_text("")
    monkeypatch.chdir(tmp_path)

    assert load_config(Path("link/effectgate.toml")).path == tmp_path / "link" / "effectgate.toml"
    assert absolute(Path("link/../link/x")) == tmp_path / "link" / "x"
