"""The tool workers ``effectgate up`` runs: ``[workers.<name>]`` of ``effectgate.toml``, each as its own NATS user.

A worker configured there gets the NATS user ``worker-<name>`` on the stack's own server (as if
the principal directory declared ``[workers.<name>]``), the stack's public keys, and is started
after the services and restarted like them when it exits (:mod:`effectgate.cli.stack.supervise`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.shared.config.effectgate_file import CONFIG_ENV, load_config

__all__ = ["WORKER", "configured_workers", "with_workers"]

WORKER = "worker"
"""What a worker process runs, in ``Stack.services`` (its process is ``worker-<name>``)."""


def configured_workers(env: Mapping[str, str]) -> dict[str, str]:
    """Worker name to its module, from the ``effectgate.toml`` ``env`` names (else ``EFFECTGATE_CONFIG``); ``{}``: none.

    Raises:
        effectgate.shared.config.toml_file.ConfigInvalid: the file is unreadable or invalid.
    """
    named = env.get(CONFIG_ENV)
    config = load_config(Path(named) if named else None)
    return {name: worker.module for name, worker in sorted(config.workers.items())}


def with_workers(directory: PrincipalDirectory, workers: Mapping[str, str]) -> PrincipalDirectory:
    """``directory`` also declaring ``workers`` (each gets its NATS user and account)."""
    return dataclasses.replace(directory, workers=directory.workers | frozenset(workers))
