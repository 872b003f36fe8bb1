"""What ``effectgate config check`` finds in a ``effectgate.toml``: problems, warnings and a summary."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec

from effectgate.cli.checks.references import reference_problems
from effectgate.cli.stack.files import descriptor_dirs
from effectgate.contracts.tools.descriptors import SEMVER, TOOL_NAME, ToolDescriptor, rate_limit_problem
from effectgate.shared.config.effectgate_file import ConfigInvalid, EffectgateConfig, load_config, load_servers
from effectgate.shared.config.settings import deprecated_mcp_env, named_mcp_servers_file
from effectgate.shared.config.toml_file import read_toml
from effectgate.shared.mcp.servers import McpServerConfig
from effectgate.shared.mcp.upstream import masked_url

__all__ = ["Report", "as_json", "check_config"]


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a check.

    Attributes:
        path: the config file checked; ``None``: none (the defaults ``up`` runs with without one).
        problems: one line per problem (the file cannot be used as it is).
        warnings: one line per doubt (it may still work where the services run).
        servers_file: the MCP servers file checked, whose servers the services load in place
            of the config file's ``[mcp.servers]``; ``None`` when none is named.
        servers: MCP server name to ``"stdio: <command>"`` or ``"http: <url>"`` (query values
            shown as ``***``), from ``servers_file`` when one is named.
        descriptor_dirs: the descriptor directories with their descriptor counts.
        descriptor_dirs_from: where ``up`` takes them from (a variable, the file, the default).
        limited_tools: the tools with operator limits.
        chat: the chat platform, or ``None`` when the file configures no chat.
    """

    path: str | None
    servers_file: str | None = None
    problems: list[str] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)
    servers: dict[str, str] = msgspec.field(default_factory=dict)
    descriptor_dirs: dict[str, int] = msgspec.field(default_factory=dict)
    descriptor_dirs_from: str = ""
    limited_tools: list[str] = msgspec.field(default_factory=list)
    chat: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the file has no problem."""
        return not self.problems


def check_config(path: Path | None, servers_file: Path | None = None) -> Report:
    """Check the ``effectgate.toml`` at ``path`` and the MCP servers file the services would load.

    Args:
        path: the config file; ``None``: none (as ``up`` without ``--config``).
        servers_file: the MCP servers file; ``None``: the one the environment names for the
            registry and the executor (``EFFECTGATE_MCP_SERVERS_FILE`` or a deprecated alias), if any.

    Returns:
        The report (nothing raised: every problem is in it).
    """
    problems: list[str] = []
    warnings: list[str] = []
    servers_file = servers_file or _named_servers_file(problems, warnings)
    config = _load(path, problems)
    servers = _servers(path, config, servers_file, problems, warnings)
    if config is None:
        return Report(path=_shown(path), servers_file=_shown(servers_file), problems=problems, warnings=warnings)
    dirs, dirs_from = descriptor_dirs(config)
    counts = {str(directory): _check_dir(dirs_from, directory, problems) for directory in dirs}
    problems += reference_problems(dirs, servers)
    return Report(
        path=_shown(config.path),
        servers_file=_shown(servers_file),
        problems=problems,
        warnings=warnings,
        servers={name: _kind(server) for name, server in servers.items()},
        descriptor_dirs=counts,
        descriptor_dirs_from=dirs_from,
        limited_tools=sorted(config.tools.limits),
        chat=config.chat.platform,
    )


def _load(path: Path | None, problems: list[str]) -> EffectgateConfig | None:
    """The config file (no file: the defaults), or ``None`` with its problems added to ``problems``."""
    if path is None:
        return EffectgateConfig()
    try:
        return load_config(path)
    except ConfigInvalid as invalid:
        problems.extend(invalid.problems)
        return None


def _shown(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _named_servers_file(problems: list[str], warnings: list[str]) -> Path | None:
    """The MCP servers file the environment names, warning of a deprecated variable; an empty one is a problem."""
    if warning := deprecated_mcp_env():
        warnings.append(warning)
    named = named_mcp_servers_file()
    if named is None:
        return None
    variable, value = named
    if not value:
        problems.append(f"{variable}: set but empty (the services would read '.'); unset it or name a file")
        return None
    return Path(value)


def _servers(
    path: Path | None,
    config: EffectgateConfig | None,
    servers_file: Path | None,
    problems: list[str],
    warnings: list[str],
) -> dict[str, McpServerConfig]:
    """The MCP servers the services load, each checked: the servers file's when named, else the config's."""
    if servers_file is None or (path is not None and _same_file(servers_file, path)):
        found, where = (config.mcp.servers if config else {}), f"{path.name if path else ''}: mcp.servers"
    else:
        found, where = _file_servers(servers_file, problems)
        if where and path is not None and config is not None and config.mcp.servers:
            warnings.append(f"{path.name}: mcp.servers: not used; the services load the servers of {servers_file}")
    for name, server in found.items():
        _check_server(f"{where}.{name}", server, problems, warnings)
    return found


def _same_file(one: Path, other: Path) -> bool:
    try:
        return one.samefile(other)
    except OSError:
        return False


def _file_servers(file: Path, problems: list[str]) -> tuple[dict[str, McpServerConfig], str]:
    """The servers of an MCP servers file (or of a ``effectgate.toml`` named as one), and where their tables are."""
    try:
        key = "servers" if "servers" in read_toml(file) else "mcp.servers"
        return load_servers(file), f"{file.name}: {key}"
    except ConfigInvalid as invalid:
        problems.extend(invalid.problems)
        return {}, ""


def _kind(server: McpServerConfig) -> str:
    url: str | None = getattr(server, "url", None)
    return f"http: {masked_url(url)}" if url else f"stdio: {server.command}"


def _check_server(where: str, server: McpServerConfig, problems: list[str], warnings: list[str]) -> None:
    """An upstream ``url`` must be http(s) with a host; ``headers_env`` variables should be set."""
    url: str | None = getattr(server, "url", None)
    if url:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(f"{where}.url: not an http(s) URL with a host: {masked_url(url)!r}")
    headers_env: dict[str, str] = getattr(server, "headers_env", None) or {}
    for header, variable in headers_env.items():
        if not os.environ.get(variable):
            warnings.append(f"{where}.headers_env.{header}: environment variable {variable} is not set here")


def _check_dir(named_by: str, directory: Path, problems: list[str]) -> int:
    """How many descriptors ``directory`` holds; it missing (named by ``named_by``) or a bad descriptor is a problem."""
    if not directory.is_dir():
        problems.append(f"{named_by}: {directory} is not a directory")
        return 0
    found = sorted(directory.glob("*.json"))
    for descriptor in found:
        if problem := _descriptor_problem(descriptor):
            problems.append(f"{descriptor}: {problem}")
    return len(found)


def _descriptor_problem(path: Path) -> str | None:
    """What is wrong with the descriptor file, or ``None`` (its schemas are checked when it is published)."""
    try:
        descriptor = msgspec.json.decode(path.read_bytes(), type=ToolDescriptor)
    except (OSError, msgspec.DecodeError) as error:
        return str(error)
    if not TOOL_NAME.match(descriptor.name):
        return f"name: {descriptor.name!r} must match {TOOL_NAME.pattern}"
    if not SEMVER.match(descriptor.version):
        return f"version: {descriptor.version!r} is not a semantic version"
    problem = rate_limit_problem(descriptor.rate_limit)
    return f"rate_limit.{problem}" if problem else None


def as_json(report: Report) -> dict[str, Any]:
    """The report as a JSON object, with ``ok``."""
    return {"ok": report.ok, **msgspec.to_builtins(report)}
