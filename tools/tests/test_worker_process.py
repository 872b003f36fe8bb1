"""The worker as a process (``python -m effectgate.tools.serving``): refused at start, killed mid-call, restarted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import nats
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client
from worker_calls import MODULES, NAME, WAIT_S, ask, call, signed

from effectgate.contracts.tools.hosting import WorkerAlive
from effectgate.contracts.tools.hosting import WorkerSubjects as S
from effectgate.devstack.servers import ServerProcess
from effectgate.devstack.workers import worker_alive, worker_process

pytestmark = pytest.mark.connected


def env(server: ServerProcess, keys: Path) -> dict[str, str]:
    return {
        "NATS_URL": server.url,
        "EFFECTGATE_PUBLIC_KEYS_DIR": str(keys),
        "PYTHONPATH": os.pathsep.join([str(MODULES), os.environ.get("PYTHONPATH", "")]),
        "EFFECTGATE_TEST_HELD_FACTORY": "1",
    }


async def test_a_worker_killed_mid_call_answers_nothing_and_once_restarted_serves_again(
    nc: Client, server: ServerProcess, keys: Path, executor_key: Ed25519PrivateKey, tmp_path: Path
) -> None:
    with worker_process("worker_held_tools", NAME, env(server, keys), tmp_path / "worker.log") as worker:
        first = await worker_alive(nc, NAME)
        progress = await nc.subscribe(S.progress(NAME, "c1"))
        held = signed(call("held", progress=S.progress(NAME, "c1")), executor_key)
        inbox = nc.new_inbox()
        answers = await nc.subscribe(inbox)
        await nc.publish(S.call(NAME, "held"), held, reply=inbox)
        await progress.next_msg(timeout=WAIT_S)  # it runs
        worker.kill()
        with pytest.raises(nats.errors.TimeoutError):
            await answers.next_msg(timeout=2)
        worker.start()
        second = await worker_alive(nc, NAME)
        assert second.instance != first.instance
        assert (await ask(nc, signed(call(call_id="c2"), executor_key))).outcome == "ok"


async def test_sigterm_announces_stopping_and_exits_0(
    nc: Client, server: ServerProcess, keys: Path, tmp_path: Path
) -> None:
    with worker_process("worker_held_tools", NAME, env(server, keys), tmp_path / "worker.log") as worker:
        started = await worker_alive(nc, NAME)
        alive = await nc.subscribe(S.alive(NAME))
        await nc.flush()
        assert worker.stop() == 0
        said = msgspec.json.decode((await alive.next_msg(timeout=WAIT_S)).data, type=WorkerAlive)
        while not said.stopping:
            said = msgspec.json.decode((await alive.next_msg(timeout=WAIT_S)).data, type=WorkerAlive)
        assert said.instance == started.instance


@pytest.mark.parametrize(
    ("module", "name", "said"),
    [
        ("no_such_module_here", NAME, "module no_such_module_here cannot be imported"),
        ("worker_no_tools", NAME, "module worker_no_tools declares no tools"),
        ("worker_held_tools", "Bad-Name", "worker name 'Bad-Name' must match"),
        ("worker_raises_at_import", NAME, "cannot be imported (RuntimeError: no database configured)"),
        ("worker_exits_at_import", NAME, "cannot be imported (it called sys.exit(0))"),
        ("../../etc/passwd", NAME, "module ../../etc/passwd cannot be imported (TypeError"),
    ],
    ids=["not-importable", "no-tools", "bad-name", "import-raises", "import-exits", "a-path"],
)
def test_bad_input_is_one_line_and_exit_code_2(
    server: ServerProcess, keys: Path, module: str, name: str, said: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "effectgate.tools.serving", module, "--name", name],
        env={**os.environ, **env(server, keys)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_no_executor_key_is_refused(server: ServerProcess, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "effectgate.tools.serving", "worker_held_tools", "--name", NAME],
        env={**os.environ, **env(server, tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "receipts.pub cannot be used" in done.stderr
