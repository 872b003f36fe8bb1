"""``effectgate up`` keeps the stack running: deaths reported and restarted, a give-up exits 3, stable ports.

The real ``effectgate up`` process with its nats-server, redis-server and five services;
processes are killed with SIGKILL as a crash would. Backoff and limit are small
(``EFFECTGATE_UP_RESTART_*``) so each test takes seconds once the stack is up. The
tests run in order on one state directory: the last ones give up and start again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from effectgate.sdk import ToolClient

pytestmark = [pytest.mark.e2e, pytest.mark.fault, pytest.mark.timeout(300)]

EFFECTGATE = str(Path(sys.executable).parent / "effectgate")
SUPERVISION = {"EFFECTGATE_UP_RESTART_BACKOFF_S": "0.2", "EFFECTGATE_UP_RESTART_LIMIT": "2", "COLUMNS": "80"}


@dataclass
class Up:
    """A running ``effectgate up``: its working directory, process and output file."""

    cwd: Path
    process: subprocess.Popen[bytes]
    output: Path

    @property
    def state(self) -> Path:
        return self.cwd / ".effectgate"

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def ports(self) -> dict[str, int]:
        return dict(json.loads((self.state / "ports.json").read_text()))

    def effectgate(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``effectgate <args>`` run where ``up`` runs (it finds the stack in ``./.effectgate``)."""
        return subprocess.run([EFFECTGATE, *args], cwd=self.cwd, env=_env(), capture_output=True, text=True, timeout=60)

    def child(self, needle: str, parent: int | None = None) -> int:
        """The pid of the child of ``parent`` (default: ``up``) whose command line contains ``needle``."""
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError):
                ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
                command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                if ppid == (parent or self.process.pid) and needle in command:
                    return int(stat.parent.name)
        raise AssertionError(f"no child of {parent or 'up'} runs {needle!r}")


FLAKY = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "flaky_server.py"
"""An MCP server that refuses to start while a file named BROKEN is in its working directory."""


def _env() -> dict[str, str]:
    """The environment of a person at a terminal: no stack named by a variable, no ``EFFECTGATE_*`` setting."""
    return {
        k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL") and not k.startswith("EFFECTGATE_")
    }


def _start(cwd: Path, name: str) -> Up:
    env = _env()
    output = cwd / f"{name}.out"
    shutil.copy(FLAKY, cwd / "flaky.py")
    never = f'[mcp.servers.never]\ncommand = "{sys.executable}"\nargs = ["missing.py"]\n'  # broken from the start
    (cwd / "effectgate.toml").write_text(
        f'[mcp.servers.flaky]\ncommand = "{sys.executable}"\nargs = ["flaky.py"]\n' + never
    )
    command = [EFFECTGATE, "up", "--config", "effectgate.toml"]
    with output.open("wb") as sink:
        process = subprocess.Popen(command, cwd=cwd, env={**env, **SUPERVISION}, stdout=sink, stderr=subprocess.STDOUT)
    running = Up(cwd, process, output)
    _wait_for(running, "Ctrl-C stops everything", timeout_s=180)
    return running


def _stop(running: Up) -> int:
    running.process.send_signal(signal.SIGTERM)
    try:
        return running.process.wait(60)
    except subprocess.TimeoutExpired:
        running.process.kill()
        return running.process.wait()


def _wait_for(running: Up, pattern: str, timeout_s: float = 60.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout_s
    while not (found := re.search(pattern, running.text())):
        assert running.process.poll() is None, f"effectgate up exited waiting for {pattern!r}: {running.text()}"
        assert time.monotonic() < deadline, f"no {pattern!r} after {timeout_s}s: {running.text()}"
        time.sleep(0.2)
    return found


@contextlib.contextmanager
def _held(*ports: int) -> Iterator[None]:
    """Listen on each of ``ports`` that is free (one already taken stays taken by its owner)."""
    with contextlib.ExitStack() as sockets:
        for port in ports:
            sock = sockets.enter_context(socket.socket())
            with contextlib.suppress(OSError):
                sock.bind(("127.0.0.1", port))
                sock.listen()
        yield


async def _a_call_succeeds(running: Up, path: str) -> None:
    (running.state / "sandbox" / path).write_text("still here\n")
    url = _wait_for(running, r"NATS_URL=(nats://\S+)")[1]
    credentials = running.state / "credentials" / "agent-demo-agent.json"
    keys = running.state / "keys" / "public"
    async with await ToolClient.connect(url, "demo-agent", credentials=credentials, public_keys=keys) as agent:
        receipt = await agent.invoke("file_system", "read", {"path": path}, timeout_s=60)
    assert receipt.outcome.value == "succeeded", receipt.reason


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where ``up`` runs, with the defaults of NATS and Redis taken (as on a machine running its own)."""
    with _held(4222, 6379):
        yield tmp_path_factory.mktemp("supervised")


@pytest.fixture(scope="module")
def up(checkout: Path) -> Iterator[Up]:
    running = _start(checkout, "first")
    try:
        yield running
    finally:
        if running.process.poll() is None:
            _stop(running)


def test_up_prints_where_everything_listens(up: Up) -> None:
    ports, text = up.ports(), up.text()
    assert ports["nats"] != 4222 and ports["redis"] != 6379, "the defaults were taken"
    assert "nats: port 4222 is taken" in text and "redis: port 6379 is taken" in text
    assert f"NATS_URL=nats://127.0.0.1:{ports['nats']}" in text
    assert f"NATS monitoring: http://127.0.0.1:{ports['nats-monitoring']}" in text
    for service in ("registry", "policy", "approvals", "executor", "audit"):
        assert re.search(rf"{service} +http://127\.0\.0\.1:{ports[service]}\n", text), service
    assert f"logs: {up.state / 'logs'}" in text
    assert {"nats-server.log", "redis-server.log", "policy.log"} <= {p.name for p in (up.state / "logs").iterdir()}
    listening = [line for line in text.splitlines() if "http://" in line]
    assert len(listening) == 6 and max(map(len, listening)) <= 80, listening


async def test_redis_killed_is_reported_and_restarted_with_its_data(up: Up) -> None:
    os.kill(up.child(f"127.0.0.1:{up.ports()['redis']}"), signal.SIGKILL)
    _wait_for(up, r"redis-server exited \(killed by SIGKILL\); restarting in 0\.2s\n(  \| .*\n)+")
    _wait_for(up, "redis-server restarted")
    await _a_call_succeeds(up, "after-redis.txt")


async def test_a_killed_service_is_reported_and_restarted(up: Up) -> None:
    os.kill(up.child("-m effectgate.executor"), signal.SIGKILL)
    _wait_for(up, r"executor exited \(killed by SIGKILL\); restarting in 0\.2s\n  \| ")
    _wait_for(up, "executor restarted")
    await _a_call_succeeds(up, "after-executor.txt")


def test_an_mcp_server_that_breaks_and_mends_is_reported_by_up(up: Up) -> None:
    _wait_for(up, r"mcp_flaky: ready since \d\d:\d\d:\d\d")  # the state once the stack is up
    (up.cwd / "BROKEN").write_text("")
    os.kill(up.child("flaky.py", parent=up.child("-m effectgate.executor")), signal.SIGKILL)

    _wait_for(up, r"mcp_flaky: unavailable since [\d:]+: .*refusing to start: BROKEN is present")
    (up.cwd / "BROKEN").unlink()
    _wait_for(up, r"(?s)BROKEN is present.*mcp_flaky: ready since", timeout_s=90)


def test_a_server_broken_from_the_start_is_reported_and_listed_as_not_registered(up: Up) -> None:
    _wait_for(up, r"mcp_never: unavailable since [\d:]+: .*missing\.py")

    listed = up.effectgate("tools", "list")
    described = up.effectgate("tools", "describe", "mcp_never")

    told = " ".join(listed.stdout.split())
    assert listed.returncode == 0 and "mcp_never: not registered yet (its MCP server could not be listed)" in told
    assert described.returncode == 1 and "mcp_never: not registered yet" in " ".join(described.stderr.split())


def test_a_service_that_dies_at_once_every_time_is_given_up_on(up: Up) -> None:
    database = up.state / "audit.sqlite3"
    database.rename(up.state / "audit.kept")
    database.mkdir()  # the audit service cannot open its database: it exits at start, every time
    try:
        os.kill(up.child("-m effectgate.audit"), signal.SIGKILL)
        assert up.process.wait(120) == 3, up.text()
    finally:
        database.rmdir()
        (up.state / "audit.kept").rename(database)
    text = up.text()
    assert text.count("audit exited (") == 3, text
    assert re.search(r"audit exited \(exit status \d+\); giving up", text), text
    assert "gave up on audit: it exited 3 times within 300s" in " ".join(text.split())
    assert "effectgate stopped" in text


def test_up_again_listens_on_the_same_ports_and_stops_cleanly(up: Up, checkout: Path) -> None:
    assert up.process.poll() is not None, "the earlier test ended the first up"
    before = up.ports()
    with _held(before["audit"]):
        again = _start(checkout, "second")
    try:
        text, after = again.text(), again.ports()
        assert (after["nats"], after["redis"]) == (before["nats"], before["redis"]), (before, after)
        assert f"NATS_URL=nats://127.0.0.1:{before['nats']}" in text
        assert "nats: listening on" not in text, "the recorded port was free"
        assert f"audit: port {before['audit']} is taken" in text, "a port taken between runs is reported"
        assert after["audit"] != before["audit"]
    finally:
        code = _stop(again)
    assert code == 0, again.text()
    assert again.text().rstrip().endswith("effectgate stopped")
