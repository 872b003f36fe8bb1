"""What up prints of an MCP tool's state: one inert line, whatever the server wrote."""

from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO
from typing import Any

import pytest
from rich.console import Console

from effectgate.cli.client import rpc
from effectgate.cli.stack.tool_states_watch import state_line
from effectgate.contracts.tools.tool_states import ToolState

HOSTILE = "start \x1b]0;PWNED\x07\x1b[2J\x1b[H\rFORGED\x1b[0m \u2028second line \u202eevil\u202c [red]x[/red] end"


def _printed(line: Any) -> str:
    out = StringIO()
    Console(file=out, width=400, force_terminal=True, color_system="standard").print(line, soft_wrap=True)
    return out.getvalue()


def test_a_servers_stderr_in_the_reason_reaches_the_terminal_inert() -> None:
    state = ToolState(state="unavailable", reason=HOSTILE, since=datetime(2026, 12, 1, 4, 5, 6, tzinfo=UTC))

    shown = state_line("mcp_evil", state)
    printed = _printed(shown)

    assert shown.plain.startswith("mcp_evil: unavailable since 04:05:06: start ")
    assert "\n" not in shown.plain and "[red]x[/red]" in shown.plain
    for raw in ("\x1b]0;", "\x07", "\x1b[2J", "\r", "\u2028", "\u202e"):
        assert raw not in shown.plain, repr(raw)
    assert printed.count("\n") == 1 and "\x1b]0;" not in printed


def test_a_ready_tool_says_only_since_when() -> None:
    state = ToolState(state="ready", reason="1 tool, 0.4 s", since=datetime(2026, 12, 1, 4, 5, 6, tzinfo=UTC))
    assert state_line("mcp_git", state).plain == "mcp_git: ready since 04:05:06"


class _Bus:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer

    async def request(self, subject: str, body: Any, timeout_s: float) -> Any:
        return self.answer


async def test_a_refused_listing_is_an_error_never_an_empty_registry() -> None:
    refused = {"ok": False, "reason_code": "reply_too_large", "reason": "the answer is 1810326 bytes"}
    with pytest.raises(rpc.BusError, match="the registry refused its listing: reply_too_large: the answer is"):
        await rpc.listing(_Bus(refused))  # type: ignore[arg-type]
    assert (await rpc.listing(_Bus({"ok": True, "descriptors": []})))["descriptors"] == []  # type: ignore[arg-type]


def test_a_tool_not_registered_yet_is_told_inert_too() -> None:
    from effectgate.cli.render.views import unregistered_line

    state = ToolState(state="unavailable", reason=HOSTILE, since=datetime(2026, 12, 1, 4, 5, 6, tzinfo=UTC))
    shown = unregistered_line("mcp_crashy", state)

    assert shown.plain.startswith("mcp_crashy: not registered yet (its MCP server could not be listed): unavailable")
    for raw in ("\x1b[2J", "\x07", "\r", "\u2028", "\u202e", "\n"):
        assert raw not in shown.plain, repr(raw)
