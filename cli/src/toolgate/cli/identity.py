"""Who the CLI is on the bus: the credentials of the NATS user a command acts as.

A command acts as the ``operator`` (tools, approvals list, audit) or as ``approver-<n>``
(``approvals approve/reject --as <n>``). Its connection options come from, first match:

1. ``TOOLGATE_CREDENTIALS``: one credentials file, the identity the caller holds, for
   every command (an approver who holds only their own file sets it to that file);
2. ``<state dir>/credentials/<user>.json``, written by ``toolgate up`` (state dir:
   ``TOOLGATE_STATE_DIR``, default ``.toolgate``); a missing file is an error naming it;
3. no credentials directory at all: no credentials (a server started by
   ``toolgate up --insecure``, or ``NATS_URL`` with ``user:password@`` and
   ``TOOLGATE_INBOX_PREFIX``).

The server decides what the identity may do: ``--as alice`` with bob's credentials
publishes on ``tg.approvals.decide.alice`` as ``approver-bob`` and is refused by NATS.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolgate.contracts.catalog import TOKEN
from toolgate.contracts.nats_credentials import CredentialsInvalid, credentials_file, load_credentials
from toolgate.contracts.nats_permissions import OPERATOR, approver_user

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
    """The directory ``toolgate up`` keeps its state in: ``TOOLGATE_STATE_DIR``, default ``.toolgate``."""
    return Path(os.environ.get("TOOLGATE_STATE_DIR") or ".toolgate")


def identity(approver: str | None = None) -> Identity:
    """The identity of a command: ``approver-<approver>`` when given, else the operator.

    Raises:
        ValueError: ``approver`` is not one subject token.
        CredentialsInvalid: the file that applies is missing, unreadable, readable by
            others or malformed (the message names it).
    """
    if approver is not None and not TOKEN.match(approver):
        raise ValueError(f"approver {approver!r} must match {TOKEN.pattern}")
    if explicit := os.environ.get("TOOLGATE_CREDENTIALS"):
        options = load_credentials(explicit)
        return Identity(options["user"], f"{explicit} (TOOLGATE_CREDENTIALS)", options)
    folder = state_dir() / "credentials"
    if not folder.is_dir():
        prefix = os.environ.get("TOOLGATE_INBOX_PREFIX")
        return Identity(None, f"no {folder} directory", {"inbox_prefix": prefix} if prefix else {})
    user = approver_user(approver) if approver else OPERATOR
    path = credentials_file(folder, user)
    if not path.exists():
        who = f"approver {approver!r}" if approver else "the operator"
        raise CredentialsInvalid(f"no credentials for {who}: {path} does not exist (`toolgate up` writes one per user)")
    return Identity(user, str(path), load_credentials(path))
