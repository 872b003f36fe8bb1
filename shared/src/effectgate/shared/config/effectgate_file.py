"""``effectgate.toml``: the MCP servers, tool descriptor dirs, per-tool limits, chat and tool workers."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Literal

import msgspec

from effectgate.contracts.tools.adapters import SERVER_NAME
from effectgate.contracts.tools.descriptors import TOOL_NAME, RateLimit, ToolDescriptor, rate_limit_problem
from effectgate.shared.config.tables import collect, convert, unknown_keys
from effectgate.shared.config.toml_file import ConfigInvalid, absolute, read_toml
from effectgate.shared.mcp.loading import load_mcp_servers, parse_each
from effectgate.shared.mcp.servers import McpServerConfig

__all__ = [
    "CONFIG_ENV",
    "BusConfig",
    "ChatConfig",
    "ConfigInvalid",
    "McpConfig",
    "ToolLimits",
    "EffectgateConfig",
    "ToolsConfig",
    "WorkerConfig",
    "apply_limits",
    "load_config",
    "load_servers",
]

_SECTIONS = ("mcp", "tools", "chat", "bus", "workers")

MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
"""A dotted Python module name (what ``python -m`` and ``importlib`` take)."""

CONFIG_ENV = "EFFECTGATE_CONFIG"
"""The environment variable naming ``effectgate.toml`` (``--config`` sets it for the services)."""


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


class BusConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[bus]``: how the streams and buckets effectgate owns are replicated and limited.

    Each key is a field of :class:`effectgate.shared.config.bus.BusSettings` (which checks the
    values and documents them); ``None``: not set here.
    """

    replicas: int | None = None
    record_max_age_s: float | None = None
    record_max_bytes: int | None = None
    store_high_water: float | None = None


class WorkerConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[workers.<name>]``: a tool worker ``effectgate up`` runs (``effectgate worker MODULE --name <name>``).

    Attributes:
        module: the importable module declaring its tools (e.g. ``acme_tools.payments``); the
            worker process gets ``up``'s own environment, so the module must import there.
    """

    module: str


class McpConfig(msgspec.Struct, frozen=True, kw_only=True):
    """``[mcp]``: the MCP servers.

    Attributes:
        servers: server name to its config (``[mcp.servers.<name>]``), commands resolved.
    """

    servers: dict[str, McpServerConfig] = msgspec.field(default_factory=dict)


class EffectgateConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A loaded ``effectgate.toml``; paths in it are absolute (against its directory, symlinks kept).

    Attributes:
        path: the file it was read from (``None``: no file, every default).
        mcp: the ``[mcp]`` table (its ``servers``).
        tools: the ``[tools]`` table.
        chat: the ``[chat]`` table (all ``None`` when absent).
        bus: the ``[bus]`` table (all ``None`` when absent).
        workers: worker name to the module it serves (``[workers.<name>]``).
    """

    path: Path | None = None
    mcp: McpConfig = msgspec.field(default_factory=McpConfig)
    tools: ToolsConfig = msgspec.field(default_factory=ToolsConfig)
    chat: ChatConfig = msgspec.field(default_factory=ChatConfig)
    bus: BusConfig = msgspec.field(default_factory=BusConfig)
    workers: dict[str, WorkerConfig] = msgspec.field(default_factory=dict)

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


def load_config(path: Path | None) -> EffectgateConfig:
    """Read and check ``effectgate.toml`` at ``path``.

    Args:
        path: the file; ``None``: the file named by ``EFFECTGATE_CONFIG``, and when that is
            unset too, a config of defaults (no servers, no descriptor dirs, no chat).

    Raises:
        ConfigInvalid: the file cannot be read (as :func:`~effectgate.shared.config.toml_file.read_toml`:
            no regular file, over 1 MiB, not UTF-8, nested too deeply), is not TOML, or has problems: an unknown
            table or key (with the closest known one), a value of the wrong type, a bad
            server or tool name, a command not found, a rate or timeout out of range.
            ``problems`` lists every one found, each starting with the file name.
    """
    path = path or _named_path()
    if path is None:
        return EffectgateConfig()
    document = read_toml(path)
    problems = [f"{problem} (tables: {', '.join(_SECTIONS)})" for problem in unknown_keys(document, _SECTIONS, "")]
    servers = collect(problems, _servers, document.get("mcp", {}), path.parent)
    tools = collect(problems, _tools, document.get("tools", {}))
    chat = collect(problems, convert, document.get("chat", {}), ChatConfig, "chat")
    bus = collect(problems, convert, document.get("bus", {}), BusConfig, "bus")
    workers = collect(problems, _workers, document.get("workers", {}))
    if problems or servers is None or tools is None or chat is None or bus is None or workers is None:
        raise ConfigInvalid([f"{path.name}: {problem}" for problem in problems])
    servers_config = McpConfig(servers=servers)
    return EffectgateConfig(path=absolute(path), mcp=servers_config, tools=tools, chat=chat, bus=bus, workers=workers)


def load_servers(path: Path) -> dict[str, McpServerConfig]:
    """The MCP servers of ``path``: an MCP servers file (``[servers.<name>]``) or a ``effectgate.toml``.

    Raises:
        ConfigInvalid: as :func:`~effectgate.shared.mcp.loading.load_mcp_servers` or :func:`load_config`.
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


def _workers(table: Any) -> dict[str, WorkerConfig]:
    if not isinstance(table, dict):
        raise ValueError("workers: expected a table of worker tables ([workers.<name>] module = ...)")
    problems: list[str] = []
    found: dict[str, WorkerConfig] = {}
    for name, spec in table.items():
        where = f"workers.{name}"
        problems += [] if SERVER_NAME.match(name) else [f"{where}: worker name must match {SERVER_NAME.pattern}"]
        chosen = collect(problems, convert, spec, WorkerConfig, where)
        if chosen is not None and not MODULE_NAME.match(chosen.module):
            problems.append(f"{where}.module: must be a dotted module name, got {chosen.module!r}")
        found.update({name: chosen} if chosen else {})
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
