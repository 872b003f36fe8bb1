"""Reading the MCP servers configuration: a file's ``[servers.<name>]`` tables, or such a table of tables.

Each server table becomes a :class:`~effectgate.shared.mcp.servers.McpServerConfig` (its
fields and meaning: :mod:`effectgate.shared.mcp.servers`) with its command, ``cwd`` and
``file_root`` made absolute; every problem is reported at once, one line each, starting with
its key path (:mod:`effectgate.shared.config.tables`).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import msgspec

from effectgate.contracts.tools.adapters import SERVER_NAME
from effectgate.contracts.tools.descriptors import RateLimit, rate_limit_problem
from effectgate.shared.config.tables import collect, convert, did_you_mean
from effectgate.shared.config.toml_file import ConfigInvalid, absolute, read_toml
from effectgate.shared.mcp.servers import McpServerConfig, Override

__all__ = ["load_mcp_servers", "parse_each", "parse_servers", "resolve_command"]


_UNTRUSTED_ONLY = ("default_side_effect_class", "default_risk_tier")
"""Fields that mean something only when the server's hints are not trusted."""


def resolve_command(command: str, base_dir: Path | None = None) -> str:
    """Return the absolute path of ``command``.

    Order: an absolute path as is; a path with a separator relative to ``base_dir``
    (default: the working directory), made absolute with :func:`absolute` (symlinks kept:
    ``../venv/bin/python`` must run as that virtualenv's interpreter, not as the base
    interpreter it links to); a bare name next to ``sys.executable`` (the virtualenv's
    scripts dir, which is not on ``PATH`` when the venv is not activated), then on ``PATH``.

    Raises:
        ValueError: no executable file was found.
    """
    if os.path.isabs(command):
        found: str | None = command if os.access(command, os.X_OK) else None
    elif os.sep in command:
        candidate = (base_dir or Path.cwd()) / command
        found = str(absolute(candidate)) if os.access(candidate, os.X_OK) else None
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
        ConfigInvalid: the file cannot be used; ``problems`` has one line per problem,
            each starting with the file name. The file cannot be read, is no regular file,
            is over 1 MiB, is not UTF-8 or not TOML, or nests too deeply
            (:func:`~effectgate.shared.config.toml_file.read_toml`); or an unknown top-level key, a
            bad server name, a field of the wrong type or an unknown field (named, e.g.
            ``servers.git.args[0]``), a ``rate_limit`` whose ``calls`` is not an integer
            from 1 to 1000000 or whose ``period_s`` is not a finite number of seconds
            above 0 (e.g. ``servers.git.overrides.git_log.rate_limit.calls``), a default
            class or tier on a server whose hints are trusted (it would be ignored), or a
            command that cannot be found.
    """
    document = read_toml(path)
    unknown = sorted(set(document) - {"servers"})
    problems = [
        f"unknown top-level key {key!r} (expected only 'servers'){did_you_mean(key, ['servers'])}" for key in unknown
    ]
    servers, failed = parse_each(document.get("servers", {}), path.parent, "servers")
    if problems or failed:
        raise ConfigInvalid([f"{path.name}: {problem}" for problem in problems + failed])
    return servers


def parse_servers(tables: Any, base_dir: Path, where: str) -> dict[str, McpServerConfig]:
    """Parse a table of server tables (the MCP servers file's ``servers``, ``effectgate.toml``'s ``mcp.servers``).

    Args:
        tables: the parsed TOML value, server name to its table.
        base_dir: the directory relative commands are resolved against (the file's).
        where: the key path of ``tables`` in its file, used in error messages.

    Raises:
        ConfigInvalid: as :func:`load_mcp_servers`, one line per problem, each starting with the key path.
    """
    servers, problems = parse_each(tables, base_dir, where)
    if problems:
        raise ConfigInvalid(problems)
    return servers


def parse_each(tables: Any, base_dir: Path, where: str) -> tuple[dict[str, McpServerConfig], list[str]]:
    """Like :func:`parse_servers`, but every problem is returned instead of raised.

    Returns:
        The servers that parsed, and one line per problem (``[]``: every server parsed).
    """
    if not isinstance(tables, dict):
        return {}, [f"{where}: expected a table of server tables"]
    servers: dict[str, McpServerConfig] = {}
    problems: list[str] = []
    for name, table in tables.items():
        parsed = collect(problems, _server, name, table, base_dir, f"{where}.{name}")
        if parsed is not None:
            servers[name] = parsed
    return servers, problems


def _server(name: str, table: Any, base_dir: Path, where: str) -> McpServerConfig:
    """The server of ``table``, its command and cwd made absolute.

    Raises:
        ConfigInvalid: every problem of the table (name, fields, overrides, rates, command, cwd).
    """
    problems = _table_problems(name, table, where)
    overrides = table.get("overrides", {})
    if not isinstance(overrides, dict):
        problems.append(f"{where}.overrides: expected a table of tool tables")
        overrides = {}
    config = collect(problems, convert, {**table, "name": name, "overrides": {}}, McpServerConfig, where)
    parsed: dict[str, Override] = {}
    for tool, spec in overrides.items():
        override = collect(problems, convert, spec, Override, f"{where}.overrides.{tool}")
        problems += _rate_problems(override.rate_limit if override else None, f"{where}.overrides.{tool}.rate_limit")
        parsed.update({tool: override} if override else {})
    if config is None:
        raise ConfigInvalid(problems)
    problems += _rate_problems(config.rate_limit, f"{where}.rate_limit")
    located = collect(problems, _located, config, base_dir, where)
    if problems or located is None:
        raise ConfigInvalid(problems)
    return msgspec.structs.replace(located, overrides=parsed)


def _located(config: McpServerConfig, base_dir: Path, where: str) -> McpServerConfig:
    """``config`` with its command, cwd and ``file_root`` absolute (an HTTP upstream's command as it is).

    Raises:
        ValueError: the command is not found, or the cwd or ``file_root`` is no directory.
    """
    config = _with_file_root(config, base_dir, where)
    if config.url:
        return config
    try:
        command = resolve_command(config.command, base_dir)
    except ValueError as exc:
        raise ValueError(f"{where}.command: {exc}") from exc
    cwd = absolute(base_dir / config.cwd)
    if not cwd.is_dir():
        raise ValueError(f"{where}.cwd: {str(cwd)[:200]!r} is not a directory")
    return msgspec.structs.replace(config, command=command, cwd=str(cwd))


def _with_file_root(config: McpServerConfig, base_dir: Path, where: str) -> McpServerConfig:
    """``config`` with its ``file_root`` absolute (relative to ``base_dir``); unset stays unset.

    Raises:
        ValueError: ``file_root`` is not a directory.
    """
    if not config.file_root:
        return config
    root = absolute(base_dir / config.file_root)
    if not root.is_dir():
        raise ValueError(f"{where}.file_root: {str(root)[:200]!r} is not a directory")
    return msgspec.structs.replace(config, file_root=str(root))


def _table_problems(name: str, table: Any, where: str) -> list[str]:
    """What is wrong with a server's name and table as a whole; a table that is no table ends the check.

    Raises:
        ConfigInvalid: ``table`` is not a table (nothing else can be checked).
    """
    problems = [] if SERVER_NAME.match(name) else [f"{where}: server name must match {SERVER_NAME.pattern}"]
    if not isinstance(table, dict):
        raise ConfigInvalid([*problems, f"{where}: expected a table"])
    if "name" in table:
        problems.append(f"{where}.name: the name is the table key, do not set it")
    ignored = [key for key in _UNTRUSTED_ONLY if key in table]
    if table.get("trust_hints") is True:
        problems += [f"{where}.{key}: has no effect when trust_hints = true; use overrides" for key in ignored]
    return problems


def _rate_problems(rate: RateLimit | None, where: str) -> list[str]:
    problem = rate_limit_problem(rate) if rate is not None else None
    return [f"{where}.{problem}"] if problem else []
