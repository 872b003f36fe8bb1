"""The MCP servers configuration shared by the registry and the executor.

A TOML file (read with the stdlib ``tomllib``) declares each stdio MCP server once; the
same tables sit under ``[mcp.servers.<name>]`` in ``toolgate.toml``
(:mod:`toolgate.shared.config`), parsed by the same :func:`parse_servers`::

    [servers.git]
    command = "mcp-server-git"
    args = ["--repository", "/srv/repo"]
    env = { GIT_TERMINAL_PROMPT = "0" }
    pinned_arguments = { repo_path = "/srv/repo" }   # forced into every call
    file_root = "/srv/repo"                          # where the files its tools name lie (the executor reads them)
    trust_hints = true                               # believe the server's tool annotations
    rate_limit = { calls = 60, period_s = 60 }       # shared by the server's tools (default 30 per 60 s)
    [servers.git.overrides.git_log]                  # per tool: the operator's word
    side_effect_class = "READ_ONLY"
    risk_tier = "low"
    open_world = false                               # reaches nothing outside the system
    rate_limit = { calls = 10, period_s = 60 }       # this tool's own budget
    [servers.git.overrides.git_add]
    file_arguments = ["files"]                       # paths under file_root: an approval binds their content

    [servers.tickets]                                # a Streamable HTTP upstream
    url = "https://tickets.example/mcp"              # http or https; exclusive with command
    headers_env = { Authorization = "TICKETS_AUTH" } # header -> env var holding its value

    [servers.notes]
    command = "notes-mcp"
    default_side_effect_class = "REVERSIBLE_WRITE"   # untrusted server: the operator's default
    default_risk_tier = "medium"                     # (hints may only make it stricter)

The registry turns each server's tool listing into the tool descriptor ``mcp_<server>``;
the executor starts the same command (or connects to the same ``url``) and forces
``pinned_arguments`` into every call. A header's value is read from the environment
variable ``headers_env`` names when a connection starts (:func:`header_values`); it is
never logged, and the executor redacts it like the ``env`` values of a stdio server.
Credentials belong in such headers: a ``url``'s query values are never printed
(:func:`toolgate.shared.upstream.masked_url`), but the upstream's own logs may hold them.
A server's ``rate_limit`` becomes the descriptor's (the budget its tools share); a tool's
``rate_limit`` becomes its operation's own budget (:func:`toolgate.contracts.descriptors.rate_of`).
A tool's ``file_arguments`` are marked ``x-toolgate-file`` in its input schema
(:mod:`toolgate.contracts.file_references`): their paths are relative to the server's
``file_root``, and an approval of a call binds the content they name (the executor reads it
there); without a ``file_root`` the executor cannot see it and the approval binds the paths only.
How hints, trust, defaults and overrides combine is :mod:`toolgate.shared.mcp_mapping`'s rule.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from toolgate.contracts.adapters import SERVER_NAME
from toolgate.contracts.descriptors import RateLimit, rate_limit_problem
from toolgate.contracts.vocabulary import RiskTier, SideEffectClass
from toolgate.shared.lifetime import bound_command
from toolgate.shared.tables import collect, convert, did_you_mean
from toolgate.shared.toml_file import ConfigInvalid, absolute, read_toml
from toolgate.shared.upstream import check_upstream, header_values

__all__ = [
    "DEFAULT_MCP_RATE_LIMIT",
    "SERVER_NAME",
    "McpServerConfig",
    "Override",
    "header_values",
    "load_mcp_servers",
    "parse_each",
    "parse_servers",
    "configured_secrets",
    "resolve_command",
    "stdio_launch",
]


DEFAULT_MCP_RATE_LIMIT = RateLimit(calls=30, period_s=60.0)
"""The per-principal budget a server's tools share when its table sets no ``rate_limit``."""


class Override(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The operator's class, tier or rate for one tool; each field may be omitted.

    On a server whose hints are trusted a class or tier must be at least as strict (same
    or higher ``rank``) as what the annotations give; on an untrusted server it replaces
    the server's default and the annotations may still raise it
    (:mod:`toolgate.shared.mcp_mapping`). A ``rate_limit`` gives the tool a budget of its
    own instead of the server's shared one. ``open_world`` is the operator's word on
    whether the tool reaches outside the system (an untrusted server's tool is open-world
    unless this says ``false``); ``destination``, ``amount`` and ``cost`` become the
    operation's own (:class:`~toolgate.contracts.descriptors.OperationSpec`). ``file_arguments``
    names the tool's arguments that hold a path or a list of paths under the server's
    ``file_root`` (marked ``x-toolgate-file`` in the input schema).
    """

    side_effect_class: SideEffectClass | None = None
    risk_tier: RiskTier | None = None
    rate_limit: RateLimit | None = None
    open_world: bool | None = None
    destination: str | None = None
    amount: str | None = None
    cost: float | str | None = None
    file_arguments: tuple[str, ...] = ()


class McpServerConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One MCP server: a stdio command or a Streamable HTTP upstream (exactly one of the two).

    Attributes:
        name: server name matching :data:`SERVER_NAME` (the TOML table key).
        command: executable of a stdio server; after loading, an absolute path. Empty for
            an HTTP upstream.
        url: ``http://`` or ``https://`` endpoint of a Streamable HTTP upstream; empty for a
            stdio server.
        headers_env: HTTP header name to the environment variable holding its value (HTTP
            upstreams only); the value is read at connection start, never logged.
        args: command-line arguments (stdio only).
        cwd: working directory of the server process (stdio only); after loading, an
            absolute path: the declaring file's directory, or ``cwd`` relative to it.
        env: extra environment variables for the server process (stdio only).
        pinned_arguments: argument name to value, forced into every call (overwriting
            the agent's value) and declared ``const`` in every input schema.
        overrides: MCP tool name to its :class:`Override`.
        trust_hints: whether the server's tool annotations are believed as the MCP
            specification's defaults read them (false: they may only make a class or tier
            stricter than the operator's).
        default_side_effect_class: the operator's class for the tools of an untrusted
            server that have no override.
        default_risk_tier: the operator's tier for the same tools.
        rate_limit: the per-principal budget shared by the server's tools that have no
            ``rate_limit`` override (default :data:`DEFAULT_MCP_RATE_LIMIT`).
        file_root: the directory the tools' ``file_arguments`` are relative to (the pinned
            repository, for a git server); after loading, an absolute path (relative to the
            declaring file's directory). Empty: the executor cannot see the server's files.
    """

    name: str
    command: str = ""
    url: str = ""
    headers_env: dict[str, str] = msgspec.field(default_factory=dict)
    args: list[str] = msgspec.field(default_factory=list)
    cwd: str = ""
    env: dict[str, str] = msgspec.field(default_factory=dict)
    pinned_arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    overrides: dict[str, Override] = msgspec.field(default_factory=dict)
    trust_hints: bool = False
    default_side_effect_class: SideEffectClass = SideEffectClass.IRREVERSIBLE_WRITE
    default_risk_tier: RiskTier = RiskTier.HIGH
    rate_limit: RateLimit = DEFAULT_MCP_RATE_LIMIT
    file_root: str = ""

    def __post_init__(self) -> None:
        """Refuse a server that is neither or both stdio and HTTP, or a bad URL or header.

        Raises:
            ValueError: naming the field (``command``, ``url``, ``headers_env``, ``args``, ``env``).
        """
        if bool(self.command) == bool(self.url):
            raise ValueError("set exactly one of command (a stdio server) and url (a Streamable HTTP upstream)")
        if self.url:
            _check_http(self)
        elif self.headers_env:
            raise ValueError("headers_env: applies only to a server with a url")


def _check_http(config: McpServerConfig) -> None:
    check_upstream(config.url, config.headers_env)
    for field in ("args", "cwd", "env"):
        if getattr(config, field):
            raise ValueError(f"{field}: applies only to a server with a command")


def configured_secrets(servers: Mapping[str, McpServerConfig]) -> list[str]:
    """Every value the operator configured for the servers that must never be shown: ``env`` values and header values.

    A header whose variable is unset now is skipped (its server is unavailable and says why).
    """
    known = [value for config in servers.values() for value in config.env.values()]
    for config in servers.values():
        with contextlib.suppress(ValueError):
            known += header_values(config).values()
    return known


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
            (:func:`~toolgate.shared.toml_file.read_toml`); or an unknown top-level key, a
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
    """Parse a table of server tables (the MCP servers file's ``servers``, ``toolgate.toml``'s ``mcp.servers``).

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


def stdio_launch(config: McpServerConfig) -> dict[str, Any]:
    """Keyword arguments of the ``mcp`` SDK's ``StdioServerParameters`` for stdio server ``config``.

    ``{"command": str, "args": [str, ...], "env": {str: str} | None, "cwd": str | None}``; the
    command runs through :func:`toolgate.shared.lifetime.bound_command`, so the server ends
    with the service that started it, even a killed one.
    """
    command, args = bound_command(config.command, list(config.args))
    return {"command": command, "args": args, "env": dict(config.env) or None, "cwd": config.cwd or None}


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
