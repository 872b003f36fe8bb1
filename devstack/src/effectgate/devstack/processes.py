"""Starting and ending the processes of a local stack so that none outlives its starter."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from effectgate.devstack.descendants import group_runs
from effectgate.shared.runtime.lifetime import die_with_parent

__all__ = ["GROUP_GONE_S", "end", "kill", "listening_ports", "owned", "signal_group", "spawn"]

GROUP_GONE_S = 5.0
"""How long :func:`end` waits for the SIGKILLed rest of a group to end, seconds."""


def owned() -> dict[str, Any]:
    """``subprocess.Popen`` keyword arguments of a child that ends with this process: own session, death signal."""
    return {"start_new_session": True, "preexec_fn": die_with_parent()}


def spawn(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``args`` (see the module's doc), stdout and stderr appended to ``log``."""
    with log.open("ab") as sink:
        return subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT, env=env, **owned())


def signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """``sig`` to the process group ``process`` leads (its session's), or to it alone when it leads none."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(process.pid) == process.pid:
            os.killpg(process.pid, sig)
            return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(sig)


def end(process: subprocess.Popen[bytes], timeout_s: float = 10.0, sig: signal.Signals | None = signal.SIGTERM) -> None:
    """End ``process`` and its group: ``sig`` (``None``: already sent), SIGKILL after ``timeout_s`` seconds.

    What is left of the group once its leader ended (the leader's own children) is killed too,
    and waited for (up to :data:`GROUP_GONE_S`), so nothing of it runs on return.
    """
    if process.poll() is None:
        if sig is not None:
            signal_group(process, sig)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            signal_group(process, signal.SIGKILL)
            process.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # members that outlived their leader (its own children)
        deadline = time.monotonic() + GROUP_GONE_S
        while group_runs(process.pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # a SIGKILLed process ends once the kernel next schedules it


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``process`` and its group (fault injection) and reap it."""
    end(process, 0.0, signal.SIGKILL)


_LISTEN = "0A"
"""The TCP state ``LISTEN`` in ``/proc/net/tcp``."""


def listening_ports(pid: int) -> set[int] | None:
    """The TCP ports process ``pid`` listens on, from ``/proc`` (Linux); ``None`` when that cannot be known.

    Tells a server that bound its port from one that only finds another program answering there.
    """
    try:
        descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
        tables = [Path(table).read_text() for table in ("/proc/net/tcp", "/proc/net/tcp6") if Path(table).exists()]
    except OSError:
        return None
    sockets = set()
    for descriptor in descriptors:
        with contextlib.suppress(OSError):  # closed meanwhile (the listing's own descriptor, for one)
            if (link := os.readlink(descriptor)).startswith("socket:["):
                sockets.add(link[len("socket:[") : -1])
    ports = set()
    for line in (line for table in tables for line in table.splitlines()[1:]):
        fields = line.split()
        if len(fields) > 9 and fields[3] == _LISTEN and fields[9] in sockets:
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports
