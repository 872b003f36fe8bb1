"""What ``effectgate up`` says about MCP servers: each tool's state once the stack is up, then every change.

The states are the ones the executor announces on ``tg.tool.state.<tool>``
(:mod:`effectgate.contracts.tools.tool_states`) and the registry records: at start the
registry's listing gives the current ones, then a subscription (as the operator, who may watch
them) prints each change as it is announced, e.g.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import msgspec
import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from rich.console import Console
from rich.text import Text

from effectgate.cli.render.views import one_line, state_line
from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.bus.nats_permissions import OPERATOR
from effectgate.contracts.errors import described
from effectgate.contracts.events import ToolStateChanged, decode_untrusted
from effectgate.contracts.tools.tool_states import ToolState

__all__ = ["ToolStateWatch", "state_line"]

_decoder = msgspec.json.Decoder(ToolStateChanged)


class _Listing(msgspec.Struct):
    """The part of the registry's listing read here (``tg.registry.list``)."""

    ok: bool = False
    reason: str = ""
    states: dict[str, ToolState] = {}


_listing = msgspec.json.Decoder(_Listing)


class ToolStateWatch:
    """Prints MCP tool states on ``console`` while the stack runs (a context manager).

    Args:
        stack: the running stack (its NATS URL and the operator's credentials).
        console: where lines are printed.
    """

    def __init__(self, stack: Stack, console: Console) -> None:
        self._stack, self._console = stack, console
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tool-states", daemon=True)

    def __enter__(self) -> ToolStateWatch:
        self._thread.start()
        self._started.wait(10.0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5.0)

    def _run(self) -> None:
        try:
            asyncio.run(self._watch())
        except Exception as error:  # the stack runs on without the watch
            self._console.print(
                Text.assemble(("MCP server states are not watched: ", "yellow"), one_line(described(error)))
            )
        finally:
            self._started.set()

    async def _watch(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        options: dict[str, Any] = {"max_reconnect_attempts": -1, "reconnect_time_wait": 0.5, "error_cb": _quiet}
        nc = await nats.connect(self._stack.nats_servers, **self._stack.connect_options(OPERATOR), **options)
        try:
            await nc.subscribe(Subjects.TOOL_STATES, cb=self._on_change)
            await self._print_current(nc)
            self._started.set()
            await self._stop.wait()
        finally:
            await nc.close()

    async def _print_current(self, nc: Client) -> None:
        listing = _listing.decode((await nc.request(Rpc.REGISTRY_LIST, b"{}", timeout=5.0)).data)
        if not listing.ok:
            self._console.print(Text.assemble(("MCP tool states unknown: ", "yellow"), one_line(listing.reason)))
        for tool, state in sorted(listing.states.items()):
            self._console.print(Text.assemble("  ", state_line(tool, state)), soft_wrap=True, highlight=False)

    async def _on_change(self, msg: Msg) -> None:
        try:
            event = decode_untrusted(_decoder, msg.data)
        except msgspec.DecodeError:
            return  # the registry reports what it cannot read; up only shows states
        if msg.subject != Subjects.tool_state(event.tool):
            return  # a state for another tool than its subject names: the registry does not record it either
        self._console.print(state_line(event.tool, event.state), soft_wrap=True, highlight=False)


async def _quiet(error: Exception) -> None:
    """Connection errors while NATS restarts: the supervisor reports the server itself."""
