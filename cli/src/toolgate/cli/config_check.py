"""What ``toolgate config check`` finds in a ``toolgate.toml``: problems, warnings and a summary.

Beyond what the loader refuses (:func:`toolgate.shared.config.load_config`: syntax, unknown
or mistyped keys, server and tool names, commands not found), it checks what only the
machine running the services can tell: an upstream ``url`` is an ``http(s)`` URL, the
environment variables named in ``headers_env`` are set (a warning: they may be set only
where the services run), and each descriptor directory exists and its descriptors parse.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec

from toolgate.contracts.descriptors import SEMVER, TOOL_NAME, ToolDescriptor, rate_limit_problem
from toolgate.shared.config import ConfigInvalid, ToolgateConfig, load_config
from toolgate.shared.mcp_config import McpServerConfig

__all__ = ["Report", "as_json", "check_config"]


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a check.

    Attributes:
        path: the file checked.
        problems: one line per problem (the file cannot be used as it is).
        warnings: one line per doubt (it may still work where the services run).
        servers: MCP server name to ``"stdio: <command>"`` or ``"http: <url>"``.
        descriptor_dirs: the descriptor directories with their descriptor counts.
        limited_tools: the tools with operator limits.
        chat: the chat platform, or ``None`` when the file configures no chat.
    """

    path: str
    problems: list[str] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)
    servers: dict[str, str] = msgspec.field(default_factory=dict)
    descriptor_dirs: dict[str, int] = msgspec.field(default_factory=dict)
    limited_tools: list[str] = msgspec.field(default_factory=list)
    chat: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the file has no problem."""
        return not self.problems


def check_config(path: Path) -> Report:
    """Check the ``toolgate.toml`` at ``path`` (nothing raised: every problem is in the report)."""
    try:
        config = load_config(path)
    except ConfigInvalid as invalid:
        return Report(path=str(path), problems=invalid.problems)
    problems: list[str] = []
    warnings: list[str] = []
    for name, server in config.mcp.servers.items():
        _check_server(f"{path.name}: mcp.servers.{name}", server, problems, warnings)
    counts = {str(directory): _check_dir(path.name, directory, problems) for directory in _dirs(config)}
    return Report(
        path=str(path),
        problems=problems,
        warnings=warnings,
        servers={name: _kind(server) for name, server in config.mcp.servers.items()},
        descriptor_dirs=counts,
        limited_tools=sorted(config.tools.limits),
        chat=config.chat.platform,
    )


def _dirs(config: ToolgateConfig) -> list[Path]:
    return config.descriptor_dirs() or []


def _kind(server: McpServerConfig) -> str:
    url: str | None = getattr(server, "url", None)
    return f"http: {url}" if url else f"stdio: {server.command}"


def _check_server(where: str, server: McpServerConfig, problems: list[str], warnings: list[str]) -> None:
    """An upstream ``url`` must be http(s) with a host; ``headers_env`` variables should be set."""
    url: str | None = getattr(server, "url", None)
    if url:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(f"{where}.url: not an http(s) URL with a host: {url!r}")
    headers_env: dict[str, str] = getattr(server, "headers_env", None) or {}
    for header, variable in headers_env.items():
        if not os.environ.get(variable):
            warnings.append(f"{where}.headers_env.{header}: environment variable {variable} is not set here")


def _check_dir(file: str, directory: Path, problems: list[str]) -> int:
    """How many descriptors ``directory`` holds; a missing directory or a bad descriptor is a problem."""
    if not directory.is_dir():
        problems.append(f"{file}: tools.descriptor_dirs: {directory} is not a directory")
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
