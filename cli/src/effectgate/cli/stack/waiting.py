"""What a starting stack is waiting for: which service, why it is not ready yet, which MCP server.

A service's ``/readyz`` (served when ``up`` chose its HTTP port) names each check that is not
ready, e.g. the registry's ``listing MCP servers: git`` or the executor's ``MCP servers still
starting: git``.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import nats.errors
from nats.aio.client import Client

from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.bus.nats_permissions import OPERATOR
from effectgate.contracts.tools.tool_states import ToolState
from effectgate.shared.config.effectgate_file import ConfigInvalid, load_config, load_servers
from effectgate.shared.config.settings import MCP_SERVERS_ENV
from effectgate.shared.runtime.connections import connect_once

if TYPE_CHECKING:
    from effectgate.cli.stack.system import Stack

__all__ = ["Said", "configured_servers", "mcp_settled", "not_ready_reasons"]

Note = Callable[[str], None]
"""Where a line saying what is awaited goes (``up`` prints it)."""


class _States(msgspec.Struct):
    """The part of the registry's listing read here."""

    states: dict[str, ToolState] = {}


class Said:
    """Passes each line to ``note`` once: a line equal to the last one is not said again."""

    def __init__(self, note: Note | None) -> None:
        self._note, self._last = note, ""

    def __call__(self, line: str) -> None:
        """Say ``line`` unless it was the last one said."""
        if self._note is not None and line != self._last:
            self._last = line
            self._note(line)


async def not_ready_reasons(stack: Stack, service: str) -> str:
    """Why ``service`` says it is not ready (its ``/readyz``), ``""`` when it serves none or answers nothing."""
    port = stack.ports.chosen.get(service) if stack.ports is not None else None
    if port is None:
        return ""
    try:
        body = await asyncio.to_thread(_readyz, f"http://127.0.0.1:{port}/readyz")
    except (OSError, ValueError):
        return ""
    reasons: dict[str, str] = body.get("not_ready") or {}
    shown = {name: why for name, why in reasons.items() if name != "consumers"} or reasons
    return "; ".join(str(why) for why in shown.values())


def _readyz(url: str) -> dict[str, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:
            found: dict[str, dict[str, str]] = json.loads(response.read())
    except urllib.error.HTTPError as refused:  # 503: not ready, with the reasons
        found = json.loads(refused.read())
    return found


def configured_servers(env: Mapping[str, str]) -> list[str]:
    """The MCP servers the registry and the executor of ``env`` run: the servers file's, else the config's.

    ``[]`` when none is configured or the file cannot be read (the services then say why).
    """
    named = next((env[name] for name in MCP_SERVERS_ENV if env.get(name)), None)
    try:
        if named is not None:
            return sorted(load_servers(Path(named)))
        config = env.get("EFFECTGATE_CONFIG")
        return sorted(load_config(Path(config)).mcp.servers) if config else []
    except (ConfigInvalid, OSError):
        return []


async def mcp_settled(stack: Stack, since: datetime, deadline: float, say: Note) -> list[str]:
    """Wait until each configured MCP server has left ``starting`` (announced after ``since``), or ``deadline``.

    Args:
        stack: the running stack (the registry is asked as the operator).
        since: when the executor was started; an older recorded state is from an earlier run.
        deadline: ``time.monotonic()`` after which nothing more is awaited.
        say: told which server is awaited.

    Returns:
        The servers still starting (or not announced yet) at the deadline, ``[]`` when none is.
    """
    servers = configured_servers(stack.env)
    if not servers:
        return []
    nc = await connect_once(stack.nats_url, **stack.connect_options(OPERATOR))
    try:
        while waiting := await _starting(nc, servers, since):
            if time.monotonic() > deadline:
                return waiting
            say(f"waiting for MCP server{'s' if len(waiting) > 1 else ''} {', '.join(waiting)} to start")
            await asyncio.sleep(0.5)
    finally:
        await nc.close()
    return []


async def _starting(nc: Client, servers: list[str], since: datetime) -> list[str]:
    """The servers whose state recorded since ``since`` is ``starting``, or that have none recorded since."""
    try:
        reply = await nc.request(Rpc.REGISTRY_LIST, b"{}", timeout=5)
        states = msgspec.json.decode(reply.data, type=_States).states
    except (nats.errors.Error, msgspec.DecodeError):
        return servers
    recorded = [states.get(f"mcp_{name}") for name in servers]
    return [name for name, state in zip(servers, recorded, strict=True) if not _settled(state, since)]


def _settled(state: ToolState | None, since: datetime) -> bool:
    return state is not None and state.since >= since and state.state != "starting"
