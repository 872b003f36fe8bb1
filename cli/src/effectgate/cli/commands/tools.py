"""``effectgate tools list`` and ``tools describe``: the registry as the operator sees it.

Also what ``tools publish`` refuses before it signs anything (:func:`publish_refusal`).
"""

from __future__ import annotations

from typing import Annotated, Any, NoReturn

import msgspec
import typer
from rich.markup import escape

from effectgate.cli.client import rpc
from effectgate.cli.client.session import NatsUrl, console, err_console, on_bus
from effectgate.cli.render.describe import STATE_KEYS, describe_tool
from effectgate.cli.render.output import AsJson, did_you_mean, print_json
from effectgate.cli.render.views import state_reasons, tools_table, unregistered_line
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.references import reference_problem
from effectgate.contracts.tools.tool_states import ToolState

__all__ = ["publish_refusal", "tools_describe", "tools_list"]


def publish_refusal(value: Any) -> tuple[str, str] | None:
    """``(reason_code, reason)`` the registry would refuse a descriptor with for a dangling reference, or ``None``.

    An adapter no executor has or a pointer at a missing or mistyped argument
    (:func:`~effectgate.contracts.tools.references.reference_problem`) is refused before anything is
    signed or sent; a value that is not a descriptor at all is left to the registry's answer.
    """
    try:
        descriptor = msgspec.convert(value, ToolDescriptor)
    except msgspec.ValidationError:
        return None
    return reference_problem(descriptor)


Version = Annotated[str | None, typer.Option("--version", help="An exact version (default: the latest).")]


def tools_list(as_json: AsJson = False, nats_url: NatsUrl = "") -> None:
    """List every tool's latest version, one row per operation, with its state (ready, unavailable, degraded)."""
    reply: dict[str, Any] = on_bus(nats_url, rpc.listing)
    descriptors, states = reply.get("descriptors") or [], reply.get("states") or {}
    if as_json:
        listed = [{**item, **_state_keys(states.get(item.get("name")))} for item in descriptors]
        names = {item.get("name") for item in descriptors}
        waiting = [
            {"name": name, "registered": False, **_state_keys(state)}
            for name, state in states.items()
            if name not in names
        ]
        print_json(listed + sorted(waiting, key=lambda item: str(item["name"])))
        return
    tools, recorded = [_descriptor(item)[0] for item in descriptors], msgspec.convert(states, dict[str, ToolState])
    console.print(tools_table(tools, recorded))
    for line in state_reasons(tools, recorded):
        console.print(line, soft_wrap=True)
    registered = {tool.name for tool in tools}
    for name, state in sorted(recorded.items()):
        if name not in registered:
            console.print(unregistered_line(name, state), soft_wrap=True)


def _descriptor(raw: dict[str, Any]) -> tuple[ToolDescriptor, dict[str, Any]]:
    """The descriptor, and the state keys the registry put beside its fields (if any)."""
    state = {key: raw[key] for key in STATE_KEYS if key in raw}
    fields = {key: value for key, value in raw.items() if key not in STATE_KEYS}
    return msgspec.convert(fields, ToolDescriptor), state


async def _lookup(bus: rpc.Bus, tool: str, version: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The registry's answer for ``tool``, and its listing (every tool's name and every recorded state)."""
    reply: dict[str, Any] = await rpc.request(bus, Rpc.REGISTRY_GET, {"tool": tool, "version": version})
    listing: dict[str, Any] = await rpc.request(bus, Rpc.REGISTRY_LIST, {})
    return reply, listing


def _state_keys(state: dict[str, Any] | None) -> dict[str, Any]:
    """A recorded tool state as :data:`STATE_KEYS` (empty: none recorded)."""
    return {"state": state.get("state"), "state_reason": state.get("reason", "")} if state else {}


def tools_describe(tool: str, version: Version = None, as_json: AsJson = False, nats_url: NatsUrl = "") -> None:
    """Show one tool: each operation's side-effect class, risk tier, limits and input/output schemas."""
    reply, listing = on_bus(nats_url, lambda bus: _lookup(bus, tool, version))
    state = (listing.get("states") or {}).get(tool)
    if not reply.get("ok"):
        _refused(tool, reply, [str(item.get("name")) for item in listing.get("descriptors") or []], state)
    raw = {**reply["descriptor"], **_state_keys(state)}
    if as_json:
        print_json(raw)
        return
    descriptor, shown = _descriptor(raw)
    console.print(describe_tool(descriptor, shown))


def _refused(tool: str, reply: dict[str, Any], names: list[str], state: dict[str, Any] | None) -> NoReturn:
    """Say why ``tool`` cannot be described (with the close names, or the state of a tool not registered yet)."""
    hint = did_you_mean(tool, names) if tool not in names and state is None else ""
    err_console.print(f"[red]{escape(str(reply.get('reason_code')))}[/red]:", escape(f"{reply.get('reason')}{hint}"))
    if state is not None:
        recorded = msgspec.convert(state, ToolState)
        err_console.print(unregistered_line(tool, recorded), soft_wrap=True)
    raise typer.Exit(1)
