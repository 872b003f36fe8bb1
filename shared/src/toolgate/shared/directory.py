"""The principal directory: who the agents and the approvers are.

Pure: parses TOML text (``tomllib``, TOML 1.0) handed in by the caller. The format::

    [principals.demo-agent]
    autonomy = 1                 # 0..3
    roles = ["agent"]

    [approvers.alice]
    roles = ["operator"]

A principal is the NATS token of an agent (``tg.req.<principal>``); an approver is a
person answering from chat-ops or the CLI. Unknown keys are refused, so that a typo
(``autonmy``) cannot silently change what an agent may do.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MAX_AUTONOMY", "DirectoryInvalid", "Principal", "PrincipalDirectory", "load_directory"]


class DirectoryInvalid(ValueError):
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
    """

    name: str
    autonomy: int
    roles: frozenset[str]


@dataclass(frozen=True, slots=True, eq=False)
class PrincipalDirectory:
    """The agents and approvers known to the policy service.

    Attributes:
        principals: principal name to :class:`Principal`.
        approvers: approver name to their role names.
    """

    principals: Mapping[str, Principal]
    approvers: Mapping[str, frozenset[str]]

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
        _only_keys(document, {"principals", "approvers"}, "principal directory")
        principals = {n: _principal(n, t) for n, t in _table(document, "principals").items()}
        approvers = {n: _approver(n, t) for n, t in _table(document, "approvers").items()}
        return cls(principals=principals, approvers=approvers)

    def principal(self, name: str) -> Principal | None:
        """Return the principal called ``name``, or None when it is not in the directory."""
        return self.principals.get(name)

    def is_approver(self, approver: str, role: str) -> bool:
        """Return True when ``approver`` is listed under ``[approvers]`` with ``role``."""
        return role in self.approvers.get(approver, frozenset())


def _table(document: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = document.get(key, {})
    if not isinstance(value, dict):
        raise DirectoryInvalid(f"[{key}] must be a table of tables")
    return value


def _only_keys(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise DirectoryInvalid(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")


def _principal(name: str, table: Any) -> Principal:
    where = f"[principals.{name}]"
    if not isinstance(table, dict):
        raise DirectoryInvalid(f"{where} must be a table")
    _only_keys(table, {"autonomy", "roles"}, where)
    autonomy = table.get("autonomy")
    if type(autonomy) is not int or not 0 <= autonomy <= MAX_AUTONOMY:
        raise DirectoryInvalid(f"{where}: autonomy must be an integer 0..{MAX_AUTONOMY}, got {autonomy!r}")
    return Principal(name=name, autonomy=autonomy, roles=_roles(table, where))


def _approver(name: str, table: Any) -> frozenset[str]:
    where = f"[approvers.{name}]"
    if not isinstance(table, dict):
        raise DirectoryInvalid(f"{where} must be a table")
    _only_keys(table, {"roles"}, where)
    return _roles(table, where)


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
