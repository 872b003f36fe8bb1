"""The principal directory: who the agents, the approvers and the tool workers are."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.chat_ids import PLATFORMS, ChatDirectory, ChatIds, ChatIdsInvalid, chat_directory, chat_ids_of
from effectgate.contracts.errors import Problem
from effectgate.contracts.tools.adapters import SERVER_NAME

__all__ = ["MAX_AUTONOMY", "ChatIds", "DirectoryInvalid", "Principal", "PrincipalDirectory", "load_directory"]


class DirectoryInvalid(Problem, ValueError):
    """The principal directory cannot be used.

    Attributes:
        reason: what is wrong, naming the table and key.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


MAX_AUTONOMY = 3
"""Autonomy levels run from 0 (may do nothing on its own) to 3."""


@dataclass(frozen=True, slots=True)
class Principal:
    """One agent of the directory.

    Attributes:
        name: the principal, as taken from the transport.
        autonomy: autonomy level, ``0..MAX_AUTONOMY``.
        roles: role names, e.g. ``{"agent"}``.
        operator: the approver who operates this agent (may not approve its calls), if any.
    """

    name: str
    autonomy: int
    roles: frozenset[str]
    operator: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class PrincipalDirectory:
    """The agents and approvers known to the policy service.

    Attributes:
        principals: principal name to :class:`Principal`.
        approvers: approver name to their role names.
        chats: the approvers' chat identities (:mod:`effectgate.contracts.chat_ids`).
        workers: the tool workers (``[workers.<name>]``): each gets the NATS user ``worker-<name>``,
            serving the tools whose adapter is ``python:<name>``.
    """

    principals: Mapping[str, Principal]
    approvers: Mapping[str, frozenset[str]]
    chats: ChatDirectory = field(default_factory=lambda: chat_directory({}))
    workers: frozenset[str] = frozenset()

    @classmethod
    def from_toml(cls, text: str) -> PrincipalDirectory:
        """Parse a directory from TOML text (format in the module docstring).

        Raises:
            DirectoryInvalid: the text is not TOML, has unknown keys, or a value of the
                wrong type or range.
        """
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise DirectoryInvalid(f"principal directory is not valid TOML: {exc}") from exc
        _only_keys(document, {"principals", "approvers", "workers"}, "principal directory")
        principals = {n: _principal(n, t) for n, t in _table(document, "principals").items()}
        approvers = {n: _approver(n, t) for n, t in _table(document, "approvers").items()}
        _operators_known(principals, approvers)
        workers = frozenset(_worker(n, t) for n, t in _table(document, "workers").items())
        return cls(principals, approvers, _chats(_table(document, "approvers")), workers)

    def principal(self, name: str) -> Principal | None:
        """Return the principal called ``name``, or None when it is not in the directory."""
        return self.principals.get(name)

    def is_approver(self, approver: str, role: str) -> bool:
        """Return True when ``approver`` is listed under ``[approvers]`` with ``role``."""
        return role in self.approvers.get(approver, frozenset())

    def operator_of(self, principal: str) -> str | None:
        """The approver who operates ``principal`` (may not approve its calls), or ``None``."""
        found = self.principals.get(principal)
        return found.operator if found else None

    def entitled(self, role: str, principal: str) -> tuple[str, ...]:
        """Approvers with ``role`` who may answer ``principal``'s calls: not it, not its operator; sorted."""
        barred = {principal, self.operator_of(principal)}
        return tuple(sorted(a for a in self.approvers if self.is_approver(a, role) and a not in barred))

    def approver_for_chat(self, platform: str, chat_user: str) -> str | None:
        """The approver whose ``platform`` (``matrix``/``slack``) user id is ``chat_user``; ``None``: nobody."""
        return self.chats.approver_for(platform, chat_user)

    def chat_ids(self, approver: str) -> ChatIds:
        """``approver``'s chat identities (for mentions); empty when none are configured."""
        return self.chats.of(approver)


def _table(document: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = document.get(key, {})
    if not isinstance(value, dict):
        raise DirectoryInvalid(f"[{key}] must be a table of tables")
    return value


def _only_keys(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        known = ", ".join(sorted(allowed)) or "none"
        raise DirectoryInvalid(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {known}")


def _principal(name: str, table: Any) -> Principal:
    where = f"[principals.{name}]"
    if not isinstance(table, dict):
        raise DirectoryInvalid(f"{where} must be a table")
    _only_keys(table, {"autonomy", "roles", "operator"}, where)
    autonomy = table.get("autonomy")
    if type(autonomy) is not int or not 0 <= autonomy <= MAX_AUTONOMY:
        raise DirectoryInvalid(f"{where}: autonomy must be an integer 0..{MAX_AUTONOMY}, got {autonomy!r}")
    operator = table.get("operator")
    if operator is not None and (not isinstance(operator, str) or not TOKEN.match(operator)):
        raise DirectoryInvalid(f"{where}: operator must be an approver's name, got {operator!r}")
    return Principal(name=name, autonomy=autonomy, roles=_roles(table, where), operator=operator)


def _operators_known(principals: Mapping[str, Principal], approvers: Mapping[str, frozenset[str]]) -> None:
    """A misspelt operator would let the real one approve their own agent: each must be a listed approver."""
    for principal in principals.values():
        if principal.operator is not None and principal.operator not in approvers:
            raise DirectoryInvalid(
                f"[principals.{principal.name}]: operator {principal.operator!r} is not listed under [approvers]"
            )


def _approver(name: str, table: Any) -> frozenset[str]:
    where = f"[approvers.{name}]"
    if not isinstance(table, dict):
        raise DirectoryInvalid(f"{where} must be a table")
    _only_keys(table, {"roles", *PLATFORMS}, where)
    return _roles(table, where)


def _worker(name: str, table: Any) -> str:
    """A worker is declared by an empty table; its name becomes a subject token and ``python:<name>``."""
    where = f"[workers.{name}]"
    if not isinstance(table, dict):
        raise DirectoryInvalid(f"{where} must be a table")
    _only_keys(table, set(), where)
    if not SERVER_NAME.match(name):
        raise DirectoryInvalid(f"{where}: a worker name must match {SERVER_NAME.pattern}")
    return name


def _chats(tables: Mapping[str, Any]) -> ChatDirectory:
    """The approvers' chat identities (each table was checked to be a table by :func:`_approver`)."""
    try:
        return chat_directory({name: chat_ids_of(table, f"[approvers.{name}]") for name, table in tables.items()})
    except ChatIdsInvalid as error:
        raise DirectoryInvalid(str(error)) from error


def _roles(table: Mapping[str, Any], where: str) -> frozenset[str]:
    roles = table.get("roles", [])
    if not isinstance(roles, list) or not all(isinstance(r, str) and r for r in roles):
        raise DirectoryInvalid(f"{where}: roles must be a list of non-empty strings, got {roles!r}")
    return frozenset(roles)


def load_directory(path: Path) -> PrincipalDirectory:
    """Read and parse the directory file at ``path``.

    Raises:
        DirectoryInvalid: the file is unreadable, not UTF-8 or not a valid directory.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise DirectoryInvalid(f"cannot read {path}: {error}") from error
    try:
        return PrincipalDirectory.from_toml(text)
    except DirectoryInvalid as error:
        raise DirectoryInvalid(f"{path}: {error.reason}") from error
