"""The worker's errors.

Hierarchy: :class:`effectgate.contracts.errors.Problem` → :class:`WorkerRefused` (the worker cannot
start as asked; its message names what was wrong, said as one line, exit code 2).
"""

from __future__ import annotations

from effectgate.contracts.errors import Problem

__all__ = ["WorkerRefused"]


class WorkerRefused(Problem):
    """The worker cannot start: a module that does not import or declares no tools, a missing key, bad settings."""

    code = "worker_refused"
