"""``effectgate config check``: is this ``effectgate.toml`` usable, and what does it declare.

The file is ``--config``, else ``EFFECTGATE_CONFIG``, else ``./effectgate.toml`` when there is
one (said: ``up`` reads it only when named), else none: what ``up`` runs with when given no
file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from effectgate.cli.checks.config import Report, as_json, check_config
from effectgate.cli.client.session import console, err_console
from effectgate.shared.config.effectgate_file import CONFIG_ENV, load_config, load_servers
from effectgate.shared.config.settings import MCP_SERVERS_ENV
from effectgate.shared.config.toml_file import absolute

__all__ = ["ConfigPath", "McpServersPath", "config_app", "up_env"]

config_app = typer.Typer(help="The effectgate.toml configuration file.", no_args_is_help=True)

ConfigPath = Annotated[
    Path | None,
    typer.Option(
        "--config",
        envvar=CONFIG_ENV,
        help="effectgate.toml (env EFFECTGATE_CONFIG; config check: default ./effectgate.toml when there is one).",
    ),
]
McpServersPath = Annotated[
    Path | None,
    typer.Option(
        "--mcp-servers",
        envvar=MCP_SERVERS_ENV[0],
        help="MCP servers file read by the registry and the executor (env EFFECTGATE_MCP_SERVERS_FILE); "
        "overrides the \\[mcp.servers] of --config.",
    ),
]
CheckedServersPath = Annotated[
    Path | None,
    typer.Option(
        "--mcp-servers",
        help="MCP servers file to check (default: the one the registry and the executor read, named by "
        "EFFECTGATE_MCP_SERVERS_FILE or a deprecated alias); its servers replace the \\[mcp.servers] of --config.",
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print the report as one JSON object.")]


@config_app.command("check")
def check(config: ConfigPath = None, mcp_servers: CheckedServersPath = None, as_json_: AsJson = False) -> None:
    """Validate the file and the MCP servers file the services read: syntax, keys, commands, URLs, descriptor dirs."""
    here = Path("effectgate.toml")
    found_here = config is None and here.is_file()
    report = check_config(here if found_here else config, mcp_servers)
    if found_here:
        err_console.print(
            f"[yellow]note:[/yellow] checked {escape(str(absolute(here)))}, found here; "
            "`up` reads it only when --config or EFFECTGATE_CONFIG names it",
            soft_wrap=True,
        )
    if as_json_:
        typer.echo(json.dumps(as_json(report), indent=2))
    else:
        _print(report)
    raise typer.Exit(0 if report.ok else 1)


def _print(report: Report) -> None:
    for warning in report.warnings:
        err_console.print("[yellow]warning:[/yellow]", escape(warning), soft_wrap=True)
    for problem in report.problems:
        err_console.print("[red]error:[/red]", escape(problem), soft_wrap=True)
    if not report.ok:
        return
    header = f"{escape(report.path)}: ok" if report.path else "no effectgate.toml (as `up` without --config): ok"
    console.print(header, soft_wrap=True)
    if report.servers_file is not None:
        console.print(f"  MCP servers file: {escape(report.servers_file)}", soft_wrap=True)
    servers = ", ".join(f"{name} ({kind})" for name, kind in report.servers.items()) or "none"
    console.print(f"  MCP servers: {escape(servers)}", soft_wrap=True)
    counted = report.descriptor_dirs.items()
    dirs = ", ".join(f"{path} ({count} descriptor{'' if count == 1 else 's'})" for path, count in counted) or "none"
    console.print(f"  descriptor dirs: {escape(dirs)}, from {escape(report.descriptor_dirs_from)}", soft_wrap=True)
    console.print(f"  limited tools: {escape(', '.join(report.limited_tools) or 'none')}")
    console.print(f"  chat: {escape(report.chat or 'none')}")


def up_env(config: Path | None, mcp_servers: Path | None) -> dict[str, str]:
    """The environment ``up`` gives every service for ``--config`` and ``--mcp-servers``.

    The paths are made absolute; the file's descriptor dirs and chat platform are passed on
    as the variables ``up`` itself reads (unless exported: the environment wins).

    Raises:
        effectgate.shared.config.effectgate_file.ConfigInvalid: the config file or the MCP servers file is
        unreadable or invalid.
    """
    env = {MCP_SERVERS_ENV[0]: str(absolute(mcp_servers))} if mcp_servers is not None else {}
    if mcp_servers is not None:
        load_servers(mcp_servers)
    loaded = load_config(config)
    if loaded.path is None:
        return env
    env[CONFIG_ENV] = str(loaded.path)
    dirs = loaded.descriptor_dirs()
    if dirs is not None and not os.environ.get("EFFECTGATE_REGISTRY_DESCRIPTORS_DIR"):
        env["EFFECTGATE_REGISTRY_DESCRIPTORS_DIR"] = os.pathsep.join(str(directory) for directory in dirs)
    if loaded.chat.platform and not os.environ.get("EFFECTGATE_CHATOPS_PLATFORM"):
        env["EFFECTGATE_CHATOPS_PLATFORM"] = loaded.chat.platform
    return env
