"""Who the CLI is on the bus: the credentials of the NATS user a command acts as."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.bus.nats_credentials import CredentialsInvalid, credentials_file, load_credentials
from effectgate.contracts.bus.nats_permissions import OPERATOR, approver_user

__all__ = ["Identity", "identity", "state_dir"]


@dataclass(frozen=True)
class Identity:
    """The NATS user a command connects as, and where its credentials came from.

    Attributes:
        user: the user name, or ``None`` when connecting without a credentials file.
        source: the credentials file, or a phrase saying why there is none.
        options: ``nats.connect`` keyword arguments (``user``, ``password``, ``inbox_prefix``).
    """

    user: str | None
    source: str
    options: dict[str, Any]


def state_dir() -> Path:
    """The directory ``effectgate up`` keeps its state in: ``EFFECTGATE_STATE_DIR``, default ``.effectgate``."""
    return Path(os.environ.get("EFFECTGATE_STATE_DIR") or ".effectgate")


def identity(approver: str | None = None) -> Identity:
    """The identity of a command: ``approver-<approver>`` when given, else the operator.

    Raises:
        ValueError: ``approver`` is not one subject token.
        CredentialsInvalid: the file that applies is missing, unreadable, readable by
            others or malformed (the message names it).
    """
    if approver is not None and not TOKEN.match(approver):
        raise ValueError(f"approver {approver!r} must match {TOKEN.pattern}")
    if explicit := os.environ.get("EFFECTGATE_CREDENTIALS"):
        options = load_credentials(explicit)
        return Identity(options["user"], f"{explicit} (EFFECTGATE_CREDENTIALS)", options)
    folder = state_dir() / "credentials"
    if not folder.is_dir():
        prefix = os.environ.get("EFFECTGATE_INBOX_PREFIX")
        return Identity(None, f"no {folder} directory", {"inbox_prefix": prefix} if prefix else {})
    user = approver_user(approver) if approver else OPERATOR
    path = credentials_file(folder, user)
    if not path.exists():
        who = f"approver {approver!r}" if approver else "the operator"
        raise CredentialsInvalid(
            f"no credentials for {who}: {path} does not exist (`effectgate up` writes one per user)"
        )
    return Identity(user, str(path), load_credentials(path))
