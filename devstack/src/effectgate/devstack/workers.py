"""A tool worker as a process of a test stack: started, SIGKILLed and started again by tests.

The worker runs ``python -m effectgate.tools.serving MODULE --name NAME`` as its own NATS user
(the caller gives its environment: a secured stack's ``Stack.nats_env("worker-<name>")``, or
``{"NATS_URL": …}`` on an open server) with the stack's public keys. :func:`worker_alive` waits
for an announcement, so a test knows the worker takes calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from nats.aio.client import Client

from effectgate.contracts.tools.hosting import WorkerAlive, WorkerSubjects
from effectgate.devstack.processes import end, kill, spawn

__all__ = ["WorkerProcess", "worker_alive", "worker_process"]


@dataclass
class WorkerProcess:
    """One worker process of a test stack.

    Attributes:
        module / name: what it serves, and as which worker.
        env: its environment (NATS settings, ``EFFECTGATE_PUBLIC_KEYS_DIR``, ``PYTHONPATH`` for the module).
        log: where its output is appended.
    """

    module: str
    name: str
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        """Start it (again); a running one is left alone."""
        if self.process is None or self.process.poll() is not None:
            args = [sys.executable, "-m", "effectgate.tools.serving", self.module, "--name", self.name]
            self.process = spawn(args, self.log, {**os.environ, **self.env})

    def kill(self) -> None:
        """SIGKILL it mid-whatever (no stopping announcement, running calls unanswered)."""
        if self.process is not None:
            kill(self.process)

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM (a graceful stop), SIGKILL after ``timeout_s`` seconds; its exit code."""
        if self.process is None:
            return None
        end(self.process, timeout_s, signal.SIGTERM)
        return self.process.returncode

    def restart(self) -> None:
        """SIGKILL, then start again."""
        self.kill()
        self.start()


@contextlib.contextmanager
def worker_process(module: str, name: str, env: dict[str, str], log: Path) -> Iterator[WorkerProcess]:
    """A started :class:`WorkerProcess`, stopped (SIGTERM, then SIGKILL) on exit."""
    worker = WorkerProcess(module, name, env, log)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


async def worker_alive(nc: Client, name: str, timeout_s: float = 20.0, instance: str | None = None) -> WorkerAlive:
    """The next announcement of worker ``name`` not ``stopping`` (of ``instance`` when given), within ``timeout_s``.

    Raises:
        TimeoutError: none came.
    """
    subscription = await nc.subscribe(WorkerSubjects.alive(name))
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                alive = msgspec.json.decode((await subscription.next_msg(timeout=timeout_s)).data, type=WorkerAlive)
                if not alive.stopping and instance in (None, alive.instance):
                    return alive
    finally:
        await subscription.unsubscribe()
