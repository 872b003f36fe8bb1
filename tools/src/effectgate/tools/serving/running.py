"""Running a worker process: the module's tools, the executor's key, the connection, until SIGTERM.

``effectgate worker MODULE --name NAME`` and ``python -m effectgate.tools.serving MODULE --name NAME``
both end in :func:`run`. Bad input (a bad name, a module that does not import or declares no
tools, no executor key, bad settings, credentials refused) is one line on stderr and exit code 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import ValidationError

from effectgate.contracts.errors import Problem, described
from effectgate.contracts.integrity.signing import load_public_key
from effectgate.contracts.tools.adapters import SERVER_NAME
from effectgate.tools.answering import Answering
from effectgate.tools.modules import ModuleUnimportable, imported
from effectgate.tools.serving.connection import WorkerSettings, connect_worker
from effectgate.tools.serving.errors import WorkerRefused
from effectgate.tools.serving.worker import Worker

__all__ = ["EXECUTOR_KEY", "REFUSED", "load_answering", "load_executor_key", "run", "serve"]

log = logging.getLogger("effectgate.tools.worker")

EXECUTOR_KEY = "receipts.pub"
"""The executor's public key in the public keys directory: it signs calls with the key it signs receipts with."""

REFUSED = 2
"""The exit code of a worker refused at start."""


def load_executor_key(public_keys: Path | None) -> Ed25519PublicKey:
    """``<public_keys>/receipts.pub`` (default ``$EFFECTGATE_PUBLIC_KEYS_DIR``).

    Raises:
        WorkerRefused: no directory given, no such file, or not a base64 Ed25519 public key.
    """
    if public_keys is None:
        raise WorkerRefused("no public keys directory: pass --public-keys or set EFFECTGATE_PUBLIC_KEYS_DIR")
    path = public_keys / EXECUTOR_KEY
    try:
        return load_public_key(path)
    except (OSError, ValueError) as error:
        raise WorkerRefused(f"the executor's key {path} cannot be used: {described(error)}") from None


Factory = Callable[[str, str], Answering]


def load_answering(module: str, worker: str) -> Answering:
    """The dispatcher of ``module``'s tools (``effectgate.tools.dispatcher_for_module``), served as ``worker``.

    Raises:
        WorkerRefused: ``worker`` is no valid name, ``module`` does not import, the factory refuses
            it, or it serves no tool.
    """
    if not SERVER_NAME.match(worker):
        raise WorkerRefused(f"worker name {worker!r} must match {SERVER_NAME.pattern}")
    try:
        imported(module)  # whatever its import raises, or a sys.exit(), is a refusal
    except ModuleUnimportable as error:
        raise WorkerRefused(f"module {error}") from None
    tools = importlib.import_module("effectgate.tools")
    factory = cast(Factory | None, getattr(tools, "dispatcher_for_module", None))
    if factory is None:
        raise WorkerRefused("effectgate.tools has no dispatcher_for_module: install a newer effectgate-tools")
    try:
        answering = factory(module, worker)
    except (Problem, ValueError, TypeError) as error:
        raise WorkerRefused(f"module {module}: {described(error)}") from None
    if not answering.served():
        raise WorkerRefused(f"module {module} declares no tools")
    return answering


async def serve(answering: Answering, name: str, key: Ed25519PublicKey, settings: WorkerSettings) -> None:
    """Serve until SIGTERM or SIGINT, then stop gracefully within ``settings.grace_s``.

    Raises:
        WorkerRefused: as :func:`~effectgate.tools.serving.connection.connect_worker`.
    """
    nc = await connect_worker(settings, name)
    worker = Worker(nc, answering, name, key, max_concurrent=settings.max_concurrent)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await worker.start()
    log.info("worker %s (instance %s) serves %d tool(s)", name, worker.instance, len(answering.served()))
    await stopping.wait()
    log.info("worker %s stopping: no more calls, %d running", name, len(worker.running))
    await worker.stop(settings.grace_s)
    with contextlib.suppress(Exception):
        await nc.close()


def run(module: str, name: str, public_keys: Path | None = None, max_concurrent: int | None = None) -> int:
    """Run worker ``name`` serving ``module`` until a signal: 0 after a graceful stop, :data:`REFUSED` when refused."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = _settings(max_concurrent)
        key = load_executor_key(public_keys or settings.public_keys_dir)
        answering = load_answering(module, name)
        asyncio.run(serve(answering, name, key, settings))
    except WorkerRefused as refused:
        print(f"effectgate worker: {refused}", file=sys.stderr)
        return REFUSED
    return 0


def _settings(max_concurrent: int | None) -> WorkerSettings:
    if max_concurrent is not None and max_concurrent < 1:
        raise WorkerRefused(f"--max-concurrent must be 1 or more, not {max_concurrent}")
    try:
        settings = WorkerSettings()
        return settings if max_concurrent is None else settings.model_copy(update={"max_concurrent": max_concurrent})
    except ValidationError as error:
        first = error.errors()[0]
        raise WorkerRefused(f"invalid setting {first['loc'][0] if first['loc'] else ''}: {first['msg']}") from None
