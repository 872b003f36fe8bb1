"""``toolgate.toml``: one file declaring the MCP servers, tool descriptor dirs, per-tool limits and chat.

Read with the stdlib ``tomllib``; each table becomes a frozen msgspec struct that refuses
unknown fields. Every problem is reported with the file name and the key path, e.g.
``toolgate.toml: mcp.servers.git.comand: unknown field; did you mean "command"?``::

    [mcp.servers.git]                       # the fields of an MCP servers file's [servers.<name>]
    command = "mcp-server-git"

    [tools]
    descriptor_dirs = ["tools"]             # relative to this file

    [tools.limits.mcp_git]                  # the operator's limits, over the descriptor's own
    timeout_s = 20
    rate_limit = { calls = 10, period_s = 60 }

    [chat]                                  # the chat-ops bot; secrets stay in files named here
    platform = "slack"
    rooms = { operator = "C0123" }

The path comes from ``--config`` or ``TOOLGATE_CONFIG``; environment variables override
the file, the file overrides the defaults (:class:`toolgate.shared.settings.ServiceSettings`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Literal

import msgspec

from toolgate.contracts.descriptors import TOOL_NAME, RateLimit, ToolDescriptor, rate_limit_problem
from toolgate.shared.mcp_config import McpServerConfig, load_mcp_servers, parse_each
from toolgate.shared.tables import collect, convert, unknown_keys
from toolgate.shared.toml_file import ConfigInvalid, absolute, read_toml

__all__ = [
    "CONFIG_ENV",
    "ChatConfig",
    "ConfigInvalid",
    "McpConfig",
    "ToolLimits",
    "ToolgateConfig",
    "ToolsConfig",
    "apply_limits",
    "load_config",
    "load_servers",
]

_SECTIONS = ("mcp", "tools", "chat")

CONFIG_ENV = "TOOLGATE_CONFIG"
"""The environment variable naming ``toolgate.toml`` (``--config`` sets it for the services)."""


class ToolLimits(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The operator's limits for one tool, replacing its descriptor's own when set.

    Attributes:
        timeout_s: wall-clock limit of one call, seconds (the executor's).
        rate_limit: per-principal rate shared by the operations without their own (the policy's).
    """

    timeout_s: float | None = None
    rate_limit: RateLimit | None = None


class ToolsConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[tools]``: where descriptors are read from, and per-tool limits.

    Attributes:
        descriptor_dirs: directories of descriptor JSON files, relative to the config file.
        limits: tool name to its :class:`ToolLimits`.
    """

    descriptor_dirs: list[str] | None = None
    limits: dict[str, ToolLimits] = msgspec.field(default_factory=dict)


class ChatConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[chat]``: the chat-ops settings (each a field of the chatops service's settings).

    No secret is held here: the ``*_file`` keys name files holding them.
    """

    platform: Literal["matrix", "slack"] | None = None
    rooms: dict[str, str] | None = None
    default_room: str | None = None
    matrix_homeserver: str | None = None
    matrix_user: str | None = None
    matrix_password_file: str | None = None
    matrix_device_id: str | None = None
    matrix_state_dir: str | None = None
    slack_mode: Literal["http", "socket"] | None = None
    slack_bot_token_file: str | None = None
    slack_signing_secret_file: str | None = None
    slack_app_token_file: str | None = None
    slack_api_url: str | None = None
    slack_host: str | None = None
    slack_port: int | None = None
    fold_chars: int | None = None
    part_chars: int | None = None
    resync_interval_s: float | None = None


class McpConfig(msgspec.Struct, frozen=True, kw_only=True):
    """``[mcp]``: the MCP servers.

    Attributes:
        servers: server name to its config (``[mcp.servers.<name>]``), commands resolved.
    """

    servers: dict[str, McpServerConfig] = msgspec.field(default_factory=dict)


class ToolgateConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A loaded ``toolgate.toml``; paths in it are absolute (against its directory, symlinks kept).

    Attributes:
        path: the file it was read from (``None``: no file, every default).
        mcp: the ``[mcp]`` table (its ``servers``).
        tools: the ``[tools]`` table.
        chat: the ``[chat]`` table (all ``None`` when absent).
    """

    path: Path | None = None
    mcp: McpConfig = msgspec.field(default_factory=McpConfig)
    tools: ToolsConfig = msgspec.field(default_factory=ToolsConfig)
    chat: ChatConfig = msgspec.field(default_factory=ChatConfig)

    @property
    def base_dir(self) -> Path:
        """The directory relative paths in the file are resolved against."""
        return self.path.parent if self.path is not None else Path.cwd()

    def descriptor_dirs(self) -> list[Path] | None:
        """The descriptor directories, absolute (symlinks kept), or ``None`` when the file names none."""
        dirs = self.tools.descriptor_dirs
        return None if dirs is None else [absolute(self.base_dir / entry) for entry in dirs]

    def chat_settings(self) -> dict[str, Any]:
        """The ``[chat]`` keys that are set, file paths made absolute."""
        chosen = {key: value for key, value in msgspec.structs.asdict(self.chat).items() if value is not None}
        for key in [key for key in chosen if key.endswith(("_file", "_dir"))]:
            chosen[key] = str(absolute(self.base_dir / chosen[key]))
        return chosen


def load_config(path: Path | None) -> ToolgateConfig:
    """Read and check ``toolgate.toml`` at ``path``.

    Args:
        path: the file; ``None``: the file named by ``TOOLGATE_CONFIG``, and when that is
            unset too, a config of defaults (no servers, no descriptor dirs, no chat).

    Raises:
        ConfigInvalid: the file cannot be read (as :func:`~toolgate.shared.toml_file.read_toml`:
            no regular file, over 1 MiB, not UTF-8, nested too deeply), is not TOML, or has problems: an unknown
            table or key (with the closest known one), a value of the wrong type, a bad
            server or tool name, a command not found, a rate or timeout out of range.
            ``problems`` lists every one found, each starting with the file name.
    """
    path = path or _named_path()
    if path is None:
        return ToolgateConfig()
    document = read_toml(path)
    problems = [f"{problem} (tables: mcp, tools, chat)" for problem in unknown_keys(document, _SECTIONS, "")]
    servers = collect(problems, _servers, document.get("mcp", {}), path.parent)
    tools = collect(problems, _tools, document.get("tools", {}))
    chat = collect(problems, convert, document.get("chat", {}), ChatConfig, "chat")
    if problems or servers is None or tools is None or chat is None:
        raise ConfigInvalid([f"{path.name}: {problem}" for problem in problems])
    return ToolgateConfig(path=absolute(path), mcp=McpConfig(servers=servers), tools=tools, chat=chat)


def load_servers(path: Path) -> dict[str, McpServerConfig]:
    """The MCP servers of ``path``: an MCP servers file (``[servers.<name>]``) or a ``toolgate.toml``.

    Raises:
        ConfigInvalid: as :func:`~toolgate.shared.mcp_config.load_mcp_servers` or :func:`load_config`.
    """
    if "servers" in read_toml(path):
        return load_mcp_servers(path)
    return load_config(path).mcp.servers


def apply_limits(descriptor: ToolDescriptor, limits: dict[str, ToolLimits]) -> ToolDescriptor:
    """``descriptor`` with the operator's limits for its tool in place of its own (same object when none)."""
    chosen = limits.get(descriptor.name)
    if chosen is None:
        return descriptor
    changes = {key: value for key, value in msgspec.structs.asdict(chosen).items() if value is not None}
    return msgspec.structs.replace(descriptor, **changes) if changes else descriptor


def _named_path() -> Path | None:
    named = os.environ.get(CONFIG_ENV)
    return Path(named) if named else None


def _servers(mcp: Any, base_dir: Path) -> dict[str, McpServerConfig]:
    if not isinstance(mcp, dict):
        raise ValueError("mcp: expected a table with a servers table")
    found, failed = parse_each(mcp.get("servers", {}), base_dir, "mcp.servers")
    problems = unknown_keys(mcp, ("servers",), "mcp") + failed
    if problems:
        raise ConfigInvalid(problems)
    return found


def _tools(table: Any) -> ToolsConfig:
    if not isinstance(table, dict) or not isinstance(table.get("limits", {}), dict):
        raise ValueError("tools: expected a table whose limits is a table of tool tables")
    problems: list[str] = []
    tools = collect(problems, convert, {**table, "limits": {}}, ToolsConfig, "tools")
    limits: dict[str, ToolLimits] = {}
    for tool, spec in table.get("limits", {}).items():
        problems += [] if TOOL_NAME.match(tool) else [f"tools.limits.{tool}: tool name must match {TOOL_NAME.pattern}"]
        chosen = collect(problems, convert, spec, ToolLimits, f"tools.limits.{tool}")
        problems += _limit_problems(tool, chosen) if chosen else []
        limits.update({tool: chosen} if chosen else {})
    if problems or tools is None:
        raise ConfigInvalid(problems)
    return msgspec.structs.replace(tools, limits=limits)


def _limit_problems(tool: str, limits: ToolLimits) -> list[str]:
    where, problems = f"tools.limits.{tool}", []
    timeout_s = limits.timeout_s
    if timeout_s is not None and not (math.isfinite(timeout_s) and timeout_s > 0):
        problems.append(f"{where}.timeout_s: must be a number of seconds above 0, got {timeout_s!r}")
    if limits.rate_limit is not None and (problem := rate_limit_problem(limits.rate_limit)):
        problems.append(f"{where}.rate_limit.{problem}")
    return problems
