"""Serving Python tools to the executor: the worker's bus edge, its connection, its process.

:class:`Worker` is the bus edge; :func:`run` the process (``effectgate worker``,
``python -m effectgate.tools.serving``); :func:`connect_worker` its connection as ``worker-<name>``.
"""

from effectgate.tools.serving.checks import MAX_CALL_BYTES, Refused, checked_call
from effectgate.tools.serving.connection import WorkerSettings, connect_worker
from effectgate.tools.serving.errors import WorkerRefused
from effectgate.tools.serving.running import EXECUTOR_KEY, REFUSED, load_answering, load_executor_key, run, serve
from effectgate.tools.serving.worker import Worker, instance_id

__all__ = [
    "EXECUTOR_KEY",
    "MAX_CALL_BYTES",
    "REFUSED",
    "Refused",
    "Worker",
    "WorkerRefused",
    "WorkerSettings",
    "checked_call",
    "connect_worker",
    "instance_id",
    "load_answering",
    "load_executor_key",
    "run",
    "serve",
]
