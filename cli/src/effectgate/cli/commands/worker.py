"""``effectgate worker MODULE --name NAME``: serve a module's Python tools to the executor until SIGTERM.

A thin shell over :func:`effectgate.tools.serving.run` (also ``python -m effectgate.tools.serving``):
the module's tools come from ``effectgate.tools.dispatcher_for_module(MODULE, NAME)``; the worker
connects as NATS user ``worker-<NAME>`` (``NATS_URL``, ``EFFECTGATE_NATS_*``) and believes only
calls the executor's ``receipts.pub`` verifies. Exit codes: 0 after a graceful stop, 2 when refused.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from effectgate.tools.serving import run

__all__ = ["worker"]


def worker(
    module: Annotated[str, typer.Argument(help="The module declaring the tools (e.g. acme_tools.payments).")],
    name: Annotated[str, typer.Option("--name", help="The worker's name: the <worker> of the tools' python:<worker>.")],
    public_keys: Annotated[
        Path | None,
        typer.Option(
            "--public-keys",
            envvar="EFFECTGATE_PUBLIC_KEYS_DIR",
            help="Directory holding the executor's receipts.pub (effectgate up: <state dir>/keys/public).",
        ),
    ] = None,
    max_concurrent: Annotated[
        int | None,
        typer.Option("--max-concurrent", help="Calls run at once (default 16, or EFFECTGATE_WORKER_MAX_CONCURRENT)."),
    ] = None,
    app_dir: Annotated[
        Path, typer.Option("--app-dir", help="The directory to import MODULE from (default: here).")
    ] = Path("."),
) -> None:
    """Serve the Python tools of MODULE to the executor, as worker NAME, until SIGTERM or Ctrl-C."""
    sys.path.insert(0, str(app_dir.resolve()))  # as python -m does, and tools publish --app-dir
    raise typer.Exit(run(module, name, public_keys, max_concurrent))
