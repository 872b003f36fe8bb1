"""CPU time and resident memory of the stack's processes, read from ``/proc`` (Linux).

``/proc/<pid>/stat`` gives a process's user and system CPU time in clock ticks (``utime``,
``stime``: fields 14 and 15, counted after the command name in parentheses, which may itself
hold spaces and parentheses); ``/proc/<pid>/status`` gives ``VmRSS`` in kB. See proc(5).
"""

from __future__ import annotations

import glob
import json
import os
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CpuPerCall",
    "cpu_per_call",
    "cpu_ticks",
    "nats_messages",
    "parse_rss_kib",
    "parse_stat_ticks",
    "rss_mib",
    "sample_cpu",
]

PROC = Path("/proc")


def parse_stat_ticks(stat: str) -> int:
    """``utime + stime`` (clock ticks) of one ``/proc/<pid>/stat`` line.

    Raises:
        ValueError: the text is not a stat line.
    """
    _, _, after_name = stat.rpartition(")")
    fields = after_name.split()
    if len(fields) < 13:
        raise ValueError(f"not a /proc/<pid>/stat line: {stat[:80]!r}")
    return int(fields[11]) + int(fields[12])  # fields[0] is field 3 (state): utime is 14, stime 15


def parse_rss_kib(status: str) -> int:
    """``VmRSS`` (KiB) of one ``/proc/<pid>/status`` text.

    Raises:
        ValueError: no ``VmRSS`` line (a kernel thread, or a process being reaped).
    """
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise ValueError("no VmRSS line")


def cpu_ticks(pid: int, proc: Path = PROC) -> int:
    """User + system CPU time of ``pid`` so far, clock ticks.

    Raises:
        OSError: no such process.
    """
    return parse_stat_ticks((proc / str(pid) / "stat").read_text())


def rss_mib(pid: int, proc: Path = PROC) -> float:
    """Resident memory of ``pid`` now, MiB.

    Raises:
        OSError / ValueError: no such process, or no resident memory line.
    """
    return parse_rss_kib((proc / str(pid) / "status").read_text()) / 1024


def sample_cpu(pids: Mapping[str, int], proc: Path = PROC) -> dict[str, int]:
    """``{name: CPU ticks}`` of every process in ``pids`` (``{name: pid}``).

    Raises:
        OSError: one of them is gone.
    """
    return {name: cpu_ticks(pid, proc) for name, pid in pids.items()}


@dataclass(frozen=True)
class CpuPerCall:
    """CPU time spent per call between two samples, microseconds.

    Attributes:
        per_process_us: ``{process name: µs per call}``.
        total_us: the sum over ``per_process_us``.
        resolution_us: one clock tick spread over the run's calls, µs: figures below it are noise.
        nats_messages: messages into and out of nats-server per call (each way, summed over
            every node of a cluster, routes between them included), ``None`` when not counted.
    """

    per_process_us: dict[str, float]
    total_us: float
    resolution_us: float
    nats_messages: float | None = None


def cpu_per_call(
    before: Mapping[str, int], after: Mapping[str, int], calls: int, ticks_per_s: int | None = None
) -> CpuPerCall:
    """CPU per call of each process sampled in both ``before`` and ``after`` (clock ticks).

    Args:
        before: :func:`sample_cpu` before the run.
        after: :func:`sample_cpu` after it (a process missing from either is left out).
        calls: calls made between them (> 0).
        ticks_per_s: clock ticks per second (default ``os.sysconf("SC_CLK_TCK")``).
    """
    tick_us = 1e6 / (ticks_per_s or os.sysconf("SC_CLK_TCK"))
    per_process = {name: (after[name] - before[name]) * tick_us / calls for name in before if name in after}
    return CpuPerCall(per_process, sum(per_process.values()), tick_us / calls)


def nats_messages(ports_dir: Path, pid: int, timeout_s: float = 2.0) -> int | None:
    """Messages into plus out of the nats-server ``pid`` since it started (``/varz``), ``None`` if unreadable.

    Args:
        ports_dir: where it wrote ``<name>_<pid>.ports`` (``--ports_file_dir``).
        pid: its process id.
        timeout_s: how long the monitoring endpoint is waited for, seconds.
    """
    for name in glob.glob(str(ports_dir / f"*_{pid}.ports")):
        try:
            base = json.loads(Path(name).read_text())["monitoring"][0]
            with urllib.request.urlopen(f"{base}/varz", timeout=timeout_s) as response:
                varz = json.loads(response.read())
            return int(varz["in_msgs"]) + int(varz["out_msgs"])
        except (ValueError, OSError, KeyError, IndexError, TypeError):
            return None
    return None
