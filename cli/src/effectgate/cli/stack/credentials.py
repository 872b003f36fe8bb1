"""Credentials of a local stack secured by NATS users: passwords, the config file, client options."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from effectgate.contracts.bus.nats_accounts import nats_accounts
from effectgate.contracts.bus.nats_credentials import (
    CredentialsInvalid,
    NatsCredentials,
    credentials_file,
    dump_credentials,
    load_credentials,
    split_servers,
)
from effectgate.contracts.bus.nats_permissions import SERVICES, nats_users
from effectgate.contracts.directory import PrincipalDirectory, load_directory
from effectgate.shared.config.nats_server import (
    SAFE_PASSWORD,
    generate_passwords,
    literal,
    password_variable,
    render_config,
)
from effectgate.shared.config.nats_server import placeholders as _placeholders

__all__ = ["BusCredentials", "config_text", "env_lines", "kept_passwords", "stack_directory", "write_private"]


@dataclass(frozen=True)
class BusCredentials:
    """The password and inbox prefix of every NATS user of one secured stack.

    Attributes:
        passwords: NATS user name to its password.
        inboxes: NATS user name to its private inbox prefix (of the services, only the chat-ops bot has one).
    """

    passwords: Mapping[str, str]
    inboxes: Mapping[str, str]

    @classmethod
    def generate(
        cls, directory: PrincipalDirectory, *, admin: bool = False, keep: Mapping[str, str] | None = None
    ) -> tuple[BusCredentials, str]:
        """Passwords for every user of ``directory``, and the config text holding them.

        Args:
            directory: the agents and approvers.
            admin: also the all-rights ``admin`` user (test observers only).
            keep: passwords to keep (by user name) instead of fresh ones, e.g. from the
                credentials files of an earlier start; users no longer present are dropped.

        Raises:
            effectgate.contracts.directory.DirectoryInvalid: a name is not one subject token.
        """
        users = nats_users(directory, admin=admin)
        kept = {user: password for user, password in (keep or {}).items() if SAFE_PASSWORD.match(password)}
        passwords = {name: kept.get(name, fresh) for name, fresh in generate_passwords(users).items()}
        inboxes = {user.name: user.inbox_prefix for user in users if user.inbox_prefix}
        return cls(passwords, inboxes), render_config(nats_accounts(directory, admin=admin), literal(passwords))

    def url(self, server_url: str, user: str) -> str:
        """``server_url`` carrying ``user``'s credentials (``nats://user:password@host:port``), each server of a list.

        Raises:
            KeyError: no such user.
        """
        userinfo = f"{quote(user, safe='')}:{quote(self.passwords[user], safe='')}"
        parts = [urlsplit(one) for one in split_servers(server_url)]
        return ",".join(urlunsplit(p._replace(netloc=f"{userinfo}@{p.netloc.rpartition('@')[2]}")) for p in parts)

    def options(self, user: str) -> dict[str, Any]:
        """``nats.connect`` keyword arguments of ``user``: credentials and private inbox prefix.

        Raises:
            KeyError: no such user.
        """
        options: dict[str, Any] = {"user": user, "password": self.passwords[user]}
        if prefix := self.inboxes.get(user):
            options["inbox_prefix"] = prefix.encode()
        return options

    def write_files(self, folder: Path) -> None:
        """One credentials file per client user (agents, approvers, the operator) in ``folder``.

        ``folder`` is made private (mode 0700), each file is mode 0600, and files of users
        that no longer exist are removed. Services get no file: their user and password
        reach them as connect options in their environment (``Stack.nats_env``).
        """
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
        clients = {user: prefix for user, prefix in self.inboxes.items() if user not in SERVICES}
        for stale in set(folder.glob("*.json")) - {credentials_file(folder, user) for user in clients}:
            stale.unlink()
        for user, prefix in clients.items():
            text = dump_credentials(NatsCredentials(user, self.passwords[user], prefix)).decode()
            write_private(credentials_file(folder, user), text)


def kept_passwords(folder: Path) -> dict[str, str]:
    """The passwords of the credentials files in ``folder`` (unreadable or invalid files are skipped)."""
    kept = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            options = load_credentials(path)
        except CredentialsInvalid:
            continue
        kept[options["user"]] = options["password"]
    return kept


def config_text(directory: PrincipalDirectory, *, placeholders: bool, admin: bool = False) -> str:
    """The nats-server config of ``directory``: ``$NATS_<USER>_PASSWORD`` placeholders, or fresh passwords.

    Raises:
        effectgate.contracts.directory.DirectoryInvalid: a name is not one subject token.
        ValueError: two users would share one password variable.
    """
    users = nats_users(directory, admin=admin)
    passwords = _placeholders(users) if placeholders else literal(generate_passwords(users))
    return render_config(nats_accounts(directory, admin=admin), passwords)


def env_lines(directory: PrincipalDirectory, *, admin: bool = False) -> str:
    """``NATS_<USER>_PASSWORD=<fresh password>`` lines (a ``.env``) for the placeholders config.

    Raises:
        effectgate.contracts.directory.DirectoryInvalid / ValueError: as :func:`config_text`.
    """
    users = nats_users(directory, admin=admin)
    _placeholders(users)
    return "".join(f"{password_variable(user)}={password}\n" for user, password in generate_passwords(users).items())


def stack_directory(env: Mapping[str, str]) -> PrincipalDirectory:
    """The agents and tool workers of the policy service's file, the approvers (and chat ids) of the approvals'.

    Args:
        env: the services' environment, naming ``EFFECTGATE_POLICY_PRINCIPALS_FILE`` and
            ``EFFECTGATE_APPROVALS_PRINCIPALS_FILE``.

    Raises:
        KeyError: a file is not named; DirectoryInvalid: a file is unreadable or invalid.
    """
    agents = load_directory(Path(env["EFFECTGATE_POLICY_PRINCIPALS_FILE"]))
    people = load_directory(Path(env["EFFECTGATE_APPROVALS_PRINCIPALS_FILE"]))
    return PrincipalDirectory(agents.principals, people.approvers, people.chats, agents.workers)


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` readable by its owner only (mode 0600), replacing it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as sink:
        sink.write(text)
    return path
