"""The MCP servers configuration shared by the registry and the executor."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import msgspec

from effectgate.contracts.tools.adapters import SERVER_NAME
from effectgate.contracts.tools.descriptors import RateLimit
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.shared.mcp.upstream import check_upstream, header_values
from effectgate.shared.runtime.lifetime import bound_command

__all__ = [
    "DEFAULT_MCP_RATE_LIMIT",
    "SERVER_NAME",
    "McpServerConfig",
    "Override",
    "header_values",
    "configured_secrets",
    "stdio_launch",
]


DEFAULT_MCP_RATE_LIMIT = RateLimit(calls=30, period_s=60.0)
"""The per-principal budget a server's tools share when its table sets no ``rate_limit``."""


class Override(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The operator's class, tier or rate for one tool; each field may be omitted.

    On a server whose hints are trusted a class or tier must be at least as strict (same
    or higher ``rank``) as what the annotations give; on an untrusted server it replaces
    the server's default and the annotations may still raise it
    (:mod:`effectgate.shared.mcp.hints`). A ``rate_limit`` gives the tool a budget of its
    own instead of the server's shared one. ``open_world`` is the operator's word on
    whether the tool reaches outside the system (an untrusted server's tool is open-world
    unless this says ``false``); ``destination``, ``amount`` and ``cost`` become the
    operation's own (:class:`~effectgate.contracts.tools.descriptors.OperationSpec`). ``file_arguments``
    names the tool's arguments that hold a path or a list of paths under the server's
    ``file_root`` (marked ``x-effectgate-file`` in the input schema).
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


def stdio_launch(config: McpServerConfig) -> dict[str, Any]:
    """Keyword arguments of the ``mcp`` SDK's ``StdioServerParameters`` for stdio server ``config``.

    ``{"command": str, "args": [str, ...], "env": {str: str} | None, "cwd": str | None}``; the
    command runs through :func:`effectgate.shared.runtime.lifetime.bound_command`, so the server ends
    with the service that started it, even a killed one.
    """
    command, args = bound_command(config.command, list(config.args))
    return {"command": command, "args": args, "env": dict(config.env) or None, "cwd": config.cwd or None}
