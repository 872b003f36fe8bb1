"""The MCP servers configuration shared by the registry and the executor.

A TOML file (read with the stdlib ``tomllib``) declares each stdio MCP server once::

    [servers.git]
    command = "mcp-server-git"
    args = ["--repository", "/srv/repo"]
    env = { GIT_TERMINAL_PROMPT = "0" }
    pinned_arguments = { repo_path = "/srv/repo" }   # forced into every call
    [servers.git.overrides.git_log]                  # per tool; may only be stricter
    side_effect_class = "READ_ONLY"
    risk_tier = "low"

The registry turns each server's tool listing into the tool descriptor ``mcp_<server>``;
the executor starts the same command and forces ``pinned_arguments`` into every call.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from toolgate.shared.vocabulary import RiskTier, SideEffectClass

__all__ = ["SERVER_NAME", "McpServerConfig", "Override", "load_mcp_servers", "resolve_command"]

_T = TypeVar("_T")

SERVER_NAME = re.compile(r"^[a-z][a-z0-9_]{0,30}$")
"""What an MCP server name may be; ``mcp_<name>`` is then a valid tool name."""


class Override(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A per-tool correction of what the server's annotations imply.

    Either field may be omitted. The registry accepts an override only when it is at
    least as strict (same or higher ``rank``) as the class or tier the annotations give.
    """

    side_effect_class: SideEffectClass | None = None
    risk_tier: RiskTier | None = None


class McpServerConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One stdio MCP server.

    Attributes:
        name: server name matching :data:`SERVER_NAME` (the TOML table key).
        command: executable; after loading, an absolute path.
        args: command-line arguments.
        env: extra environment variables for the server process.
        pinned_arguments: argument name to value, forced into every call (overwriting
            the agent's value) and declared ``const`` in every input schema.
        overrides: MCP tool name to its stricter :class:`Override`.
    """

    name: str
    command: str
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    pinned_arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    overrides: dict[str, Override] = msgspec.field(default_factory=dict)


def resolve_command(command: str, base_dir: Path | None = None) -> str:
    """Return the absolute path of ``command``.

    Order: an absolute path as is; a path with a separator relative to ``base_dir``
    (default: the working directory); a bare name next to ``sys.executable`` (the
    virtualenv's scripts dir, which is not on ``PATH`` when the venv is not activated),
    then on ``PATH``.

    Raises:
        ValueError: no executable file was found.
    """
    if os.path.isabs(command):
        found: str | None = command if os.access(command, os.X_OK) else None
    elif os.sep in command:
        candidate = (base_dir or Path.cwd()) / command
        found = str(candidate.resolve()) if os.access(candidate, os.X_OK) else None
    else:
        beside = Path(sys.executable).parent / command
        found = str(beside) if beside.is_file() and os.access(beside, os.X_OK) else shutil.which(command)
    if found is None:
        raise ValueError(f"command {command!r} is not an executable file next to the Python or on PATH")
    return found


def load_mcp_servers(path: Path) -> dict[str, McpServerConfig]:
    """Load the ``[servers.<name>]`` tables of the TOML file at ``path``.

    Returns:
        Server name to its config, commands resolved with :func:`resolve_command`.
        A file without a ``servers`` table gives ``{}``.

    Raises:
        OSError: the file cannot be read.
        ValueError: invalid TOML, an unknown top-level key, a bad server name, a field
            of the wrong type or an unknown field (the message names it, e.g.
            ``servers.git.args[0]``), or a command that cannot be found.
    """
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML: {exc}") from exc
    unknown = sorted(set(document) - {"servers"})
    if unknown:
        raise ValueError(f"{path}: unknown top-level key {unknown[0]!r} (expected only 'servers')")
    servers = document.get("servers", {})
    if not isinstance(servers, dict):
        raise ValueError(f"{path}: servers: expected a table of server tables")
    return {name: _server(name, table, path.parent) for name, table in servers.items()}


def _server(name: str, table: Any, base_dir: Path) -> McpServerConfig:
    where = f"servers.{name}"
    if not SERVER_NAME.match(name):
        raise ValueError(f"{where}: server name must match {SERVER_NAME.pattern}")
    if not isinstance(table, dict):
        raise ValueError(f"{where}: expected a table")
    if "name" in table:
        raise ValueError(f"{where}.name: the name is the table key, do not set it")
    overrides = table.get("overrides", {})
    if not isinstance(overrides, dict):
        raise ValueError(f"{where}.overrides: expected a table of tool tables")
    fields = {**table, "name": name, "overrides": {}}
    config = _convert(fields, McpServerConfig, where)
    parsed = {tool: _convert(spec, Override, f"{where}.overrides.{tool}") for tool, spec in overrides.items()}
    try:
        command = resolve_command(config.command, base_dir)
    except ValueError as exc:
        raise ValueError(f"{where}.command: {exc}") from exc
    return msgspec.structs.replace(config, command=command, overrides=parsed)


def _convert(value: Any, kind: type[_T], where: str) -> _T:
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{where}: " + str(exc).replace("`$", f"`{where}")) from exc
