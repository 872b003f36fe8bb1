"""Credentials of NATS clients: one file per user, holding its ``nats.connect`` options; URLs without them.

nats-py sends the credentials written in a URL only to that URL's own server, so after a
failover to another server of the cluster it would connect without them and be refused:
:func:`lift_credentials` turns them into options, which nats-py sends to every server.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import msgspec

from effectgate.contracts.errors import Problem

__all__ = [
    "CREDENTIAL_OPTIONS",
    "KEEPALIVE",
    "CredentialsInvalid",
    "NatsCredentials",
    "NatsUrlInvalid",
    "connect_arguments",
    "credentials_file",
    "dump_credentials",
    "load_credentials",
    "lift_credentials",
    "redact",
    "rotated",
    "split_servers",
]


def redact(text: str) -> str:
    """Hide the credentials of ``scheme://user:password@host`` URLs in ``text``."""
    return re.sub(r"(\w+://)[^/@\s]+@", r"\1***@", text)


class NatsUrlInvalid(Problem):
    """A NATS server list (``NATS_URL``) or the credentials given with it cannot be used; the message says why."""


def split_servers(nats_url: str) -> list[str]:
    """The servers of ``NATS_URL`` (one URL or a comma-separated list), in order.

    Raises:
        NatsUrlInvalid: the list is empty or has an empty entry (``a,,b``).
    """
    servers = [part.strip() for part in nats_url.split(",")]
    if not nats_url.strip() or not all(servers):
        raise NatsUrlInvalid(f"NATS_URL {_shown(servers)!r} has an empty server: list URLs separated by commas")
    return servers


def _shown(servers: Sequence[str]) -> str:
    return ",".join(_bare(server) for server in servers)


def _credentials_of(url: str) -> tuple[str, str | None] | None:
    parts = urlsplit(url if "://" in url else f"nats://{url}")
    if parts.username is None:
        return None
    return unquote(parts.username), unquote(parts.password) if parts.password is not None else None


def _bare(url: str) -> str:
    scheme, sep, rest = url.rpartition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}"


def lift_credentials(servers: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """``servers`` without the credentials written in them, and those credentials as ``nats.connect`` options.

    ``user:password@`` is a user and password, ``token@`` a token (as nats-py reads them).

    Raises:
        NatsUrlInvalid: two URLs carry different credentials (which is meant cannot be told).
    """
    found = {given for url in servers if (given := _credentials_of(url)) is not None}
    if len(found) > 1:
        raise NatsUrlInvalid(f"the URLs of NATS_URL {_shown(servers)} carry different credentials: give one")
    bare = [_bare(url) for url in servers]
    if not found:
        return bare, {}
    user, password = found.pop()
    return bare, {"token": user} if password is None else {"user": user, "password": password}


CREDENTIAL_OPTIONS = frozenset({"user", "password", "token", "nkeys_seed", "nkeys_seed_str", "user_credentials"})
"""The ``nats.connect`` options that carry an identity."""


KEEPALIVE: dict[str, Any] = {"ping_interval": 5, "max_outstanding_pings": 2}
"""PING every 5 s, the connection lost once 2 go unanswered: a server that stopped answering but keeps
its TCP connection open (frozen, cut off) is left within about 15 s (nats-py's default: 120 s, 2)."""


def rotated(servers: list[str], start: int) -> list[str]:
    """``servers`` from the ``start``-th on (modulo their number), then the ones before it."""
    first = start % len(servers) if servers else 0
    return servers[first:] + servers[:first]


def connect_arguments(url: str, options: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """``nats.connect``'s servers and options for ``url`` (one URL or a comma-separated list) and ``options``.

    The credentials written in the URLs become options, unless ``options`` carry an identity
    of their own (:data:`CREDENTIAL_OPTIONS`): those win, and the URLs' are dropped. The
    :data:`KEEPALIVE` settings apply unless ``options`` give their own.

    Raises:
        NatsUrlInvalid: see :func:`split_servers` and :func:`lift_credentials`.
    """
    servers, lifted = lift_credentials(split_servers(url))
    return servers, {**KEEPALIVE, **({} if CREDENTIAL_OPTIONS & options.keys() else lifted), **options}


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
