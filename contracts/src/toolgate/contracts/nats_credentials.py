"""Credentials files of NATS clients: one file per user, holding its ``nats.connect`` options.

``toolgate up`` writes one file per agent, approver and the operator into
``.toolgate/credentials/<user>.json`` (mode 0600, directory 0700); the SDK and the CLI
read them. The format is a JSON object whose keys are nats-py ``nats.connect`` keyword
arguments, so ``nats.connect(url, **load_credentials(path))`` connects as that user::

    {"user": "agent-demo-agent", "password": "…", "inbox_prefix": "_INBOX_agent-demo-agent"}

``inbox_prefix`` is the user's private reply prefix (:func:`toolgate.contracts.nats_permissions.private_inbox`):
with toolgate's NATS permissions no agent or approver may read the default ``_INBOX.``.
The server URL is not in the file (``toolgate up`` picks a free port on every start).
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

import msgspec

from toolgate.contracts.errors import Problem

__all__ = [
    "CredentialsInvalid",
    "NatsCredentials",
    "credentials_file",
    "dump_credentials",
    "load_credentials",
    "redact",
]


def redact(text: str) -> str:
    """Hide the credentials of ``scheme://user:password@host`` URLs in ``text``."""
    return re.sub(r"(\w+://)[^/@\s]+@", r"\1***@", text)


class CredentialsInvalid(Problem):
    """A credentials file is missing, unreadable, readable by others, or not of the format above."""


class NatsCredentials(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One NATS user's credentials.

    Attributes:
        user: the NATS user name (``agent-<p>``, ``approver-<n>``, ``operator``).
        password: its password.
        inbox_prefix: its private reply prefix (``_INBOX_<user>``).
    """

    user: str
    password: str
    inbox_prefix: str


def credentials_file(directory: Path, user: str) -> Path:
    """Where the credentials of ``user`` live in ``directory``: ``<directory>/<user>.json``."""
    return directory / f"{user}.json"


def dump_credentials(credentials: NatsCredentials) -> bytes:
    """The file's bytes: one JSON object and a newline."""
    return msgspec.json.encode(credentials) + b"\n"


def load_credentials(path: Path | str) -> dict[str, str]:
    """The ``nats.connect`` keyword arguments (``user``, ``password``, ``inbox_prefix``) in ``path``.

    Like ssh with a private key, a file that its group or others may read is refused:
    the password in it is no longer the user's alone.

    Raises:
        CredentialsInvalid: the file is missing or unreadable, readable by group or others,
            or not a JSON object with exactly ``user``, ``password`` and ``inbox_prefix`` strings.
    """
    path = Path(path)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        data = path.read_bytes()
    except OSError as error:
        raise CredentialsInvalid(f"credentials file {path}: {error.strerror or error}") from None
    if mode & 0o077:
        raise CredentialsInvalid(f"credentials file {path} may be read by others (mode {mode:04o}): chmod 600 it")
    try:
        credentials = msgspec.json.decode(data, type=NatsCredentials)
    except msgspec.DecodeError as error:
        raise CredentialsInvalid(f"credentials file {path}: {error}") from None
    return {"user": credentials.user, "password": credentials.password, "inbox_prefix": credentials.inbox_prefix}
