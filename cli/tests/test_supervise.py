"""What ``up`` does when a process exits, with real child processes, and how it keeps its ports."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from effectgate.cli.stack.ports import SERVICE_PORTS, Ports, http_port_env, stable_ports
from effectgate.cli.stack.supervise import GAVE_UP, SupervisionSettings, Supervisor, Watched, exit_status

FAST = SupervisionSettings(restart_limit=2, restart_window_s=60, restart_backoff_s=0.01, log_max_bytes=1000)


class Child:
    """A real process started by ``python -c CODE``, its output appended to ``log``."""

    def __init__(self, code: str, log: Path) -> None:
        self.code, self.log, self.starts = code, log, 0
        self.process = self.start()

    def start(self) -> subprocess.Popen[bytes]:
        self.starts += 1
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen([sys.executable, "-c", self.code], stdout=sink, stderr=subprocess.STDOUT)
        return self.process

    def watched(self) -> Watched:
        return Watched("worker", self.log, self.process_exited, self.restart)

    def process_exited(self) -> int | None:
        return self.process.poll()

    def restart(self) -> None:
        self.start()


@pytest.fixture
def out() -> Iterator[tuple[Console, StringIO]]:
    text = StringIO()
    yield Console(file=text, width=80, color_system=None), text


def test_a_process_that_keeps_exiting_is_reported_restarted_and_given_up_on(
    tmp_path: Path, out: tuple[Console, StringIO]
) -> None:
    child = Child("import sys; print('cannot open the database'); sys.exit(4)", tmp_path / "worker.log")
    console, text = out
    assert Supervisor([child.watched()], FAST, console).run(tick_s=0.01) == GAVE_UP
    said = text.getvalue()
    assert child.starts == 3, "started once, restarted up to the limit of 2"
    assert said.count("worker exited (exit status 4); restarting in") == 2
    assert "worker exited (exit status 4); giving up" in said
    assert "  | cannot open the database" in said, "the last lines of its log"
    assert "gave up on worker: it exited 3 times within 60s" in " ".join(said.split())


def test_a_process_that_runs_again_is_not_given_up_on(tmp_path: Path, out: tuple[Console, StringIO]) -> None:
    child = Child("import time; time.sleep(30)", tmp_path / "worker.log")
    console, text = out
    supervisor = Supervisor([watched := child.watched()], FAST, console)
    child.process.kill()
    child.process.wait()
    assert supervisor.check(watched, now=0.0) is None
    assert supervisor.check(watched, now=1.0) is None  # the backoff has passed: started again
    assert supervisor.check(watched, now=2.0) is None
    assert child.process.poll() is None and child.starts == 2
    assert "worker exited (killed by SIGKILL); restarting in 0.01s" in text.getvalue()
    assert "worker restarted" in text.getvalue()
    child.process.kill()
    child.process.wait()


def test_restarts_outside_the_window_are_forgotten(tmp_path: Path, out: tuple[Console, StringIO]) -> None:
    child = Child("pass", tmp_path / "worker.log")
    child.process.wait()
    console, _ = out
    supervisor = Supervisor([watched := child.watched()], FAST, console)
    for minute in range(5):  # one exit a minute: never two within the 60 s window
        assert supervisor.check(watched, now=minute * 70.0) is None
        assert supervisor.check(watched, now=minute * 70.0 + 1) is None
        child.process.wait()
    assert child.starts == 6


@pytest.mark.parametrize(("ran_s", "then_s"), [(1.0, "8"), (59.0, "8"), (60.0, "1"), (3600.0, "1")])
def test_the_backoff_doubles_while_a_process_keeps_exiting_and_starts_over_once_it_ran_the_healthy_period(
    tmp_path: Path, out: tuple[Console, StringIO], ran_s: float, then_s: str
) -> None:
    settings = SupervisionSettings(
        restart_limit=20, restart_window_s=7200, restart_backoff_s=1, restart_backoff_max_s=8, restart_healthy_s=60
    )
    child = Child("pass", tmp_path / "worker.log")  # exits at once, every time
    console, text = out
    supervisor = Supervisor([watched := child.watched()], settings, console)
    now = 0.0
    for run_s in (1.0, 1.0, 1.0, 1.0, ran_s):
        child.process.wait()
        assert supervisor.check(watched, now) is None  # the exit: a restart is scheduled
        assert watched.due is not None
        now = watched.due
        assert supervisor.check(watched, now) is None  # restarted
        now += run_s
    child.process.wait()
    supervisor.check(watched, now)

    waits = re.findall(r"restarting in (\S+)s", text.getvalue())
    assert waits == ["1", "2", "4", "8", "8", then_s]


def test_a_log_past_its_bound_moves_to_its_older_file(tmp_path: Path, out: tuple[Console, StringIO]) -> None:
    child = Child("import time; time.sleep(30)", tmp_path / "worker.log")
    (tmp_path / "worker.log").write_bytes(b"x" * 2000)
    console, _ = out
    Supervisor([watched := child.watched()], FAST, console).check(watched, now=0.0)
    assert (tmp_path / "worker.log").stat().st_size == 0
    assert (tmp_path / "worker.log.1").read_bytes() == b"x" * 2000
    child.process.kill()
    child.process.wait()


def test_exit_statuses_are_named() -> None:
    assert exit_status(1) == "exit status 1"
    assert exit_status(-9) == "killed by SIGKILL"
    assert exit_status(-200) == "killed by signal 200"


def test_bad_supervision_settings_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EFFECTGATE_UP_RESTART_LIMIT", "many")
    with pytest.raises(ValueError, match="restart_limit"):
        SupervisionSettings()


# --- ports -------------------------------------------------------------------------------------


def _taken() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_a_taken_default_is_replaced_and_the_replacement_kept_for_the_next_start(tmp_path: Path) -> None:
    with _taken() as holder:
        default = holder.getsockname()[1]
        first = stable_ports(tmp_path, {"nats": default})
        again = stable_ports(tmp_path, {"nats": default})
    assert first.chosen["nats"] != default
    assert first.notes == [
        f"nats: port {default} is taken",
        f"nats: listening on {first.chosen['nats']} instead (recorded for the next start)",
    ]
    assert again.chosen == first.chosen and again.notes == [f"nats: port {default} is taken"]
    assert json.loads((tmp_path / "ports.json").read_text()) == first.chosen


def test_a_recorded_port_taken_between_starts_is_reported_and_replaced(tmp_path: Path) -> None:
    with _taken() as default, _taken() as recorded:
        taken = (default.getsockname()[1], recorded.getsockname()[1])
        (tmp_path / "ports.json").write_text(json.dumps({"redis": taken[1]}))
        ports = stable_ports(tmp_path, {"redis": taken[0]})
    assert ports.chosen["redis"] not in taken
    assert ports.notes[:2] == [f"redis: port {taken[0]} is taken", f"redis: port {taken[1]} is taken"]


def test_a_recorded_port_an_earlier_name_now_has_is_reported_and_replaced(tmp_path: Path) -> None:
    with _taken() as holder:
        taken = holder.getsockname()[1]
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            free = sock.getsockname()[1]
        (tmp_path / "ports.json").write_text(json.dumps({"audit": free}))
        ports = stable_ports(tmp_path, {"executor": free, "audit": taken})
    assert ports.chosen["executor"] == free and ports.chosen["audit"] not in (free, taken)
    assert ports.notes[:2] == [f"audit: port {taken} is taken", f"audit: port {free} is taken"]


def test_a_free_default_is_used_and_an_unreadable_record_is_reported(tmp_path: Path) -> None:
    (tmp_path / "ports.json").write_text("{not json")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    ports = stable_ports(tmp_path, {"registry": free})
    assert ports.chosen == {"registry": free}
    assert len(ports.notes) == 1 and "unreadable" in ports.notes[0]


def test_each_service_is_told_its_http_port() -> None:
    chosen = {name: 9000 + number for number, name in enumerate(SERVICE_PORTS)}
    env = http_port_env(Ports(chosen))
    assert env["EFFECTGATE_REGISTRY_HTTP_PORT"] == "9000" and env["EFFECTGATE_CHATOPS_HTTP_PORT"] == "9005"
