"""``effectgate demo --chat matrix``: an agent's write approved from a Matrix room, end to end.

A local Synapse (its own environment, ``./dev synapse``; never a dependency of effectgate) runs
on a free loopback port; the stack runs with the chat-ops bot on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from nio import AsyncClient, MessageDirection, RoomMessagesResponse
from rich.console import Console
from rich.panel import Panel

from effectgate.cli.render.fitted import Column, FittedTable
from effectgate.cli.render.views import plain_text
from effectgate.cli.stack.launch import DEPLOY_DIR, running_stack
from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus.nats_permissions import agent_user
from effectgate.devstack.synapse import Homeserver, MatrixUser, SynapseMissing, synapse_env, synapse_server
from effectgate.sdk import ToolClient

__all__ = ["run_chat_demo", "transcript_table"]

AGENT, APPROVER = "demo-agent", "alice"
CARD_KEY = "dev.effectgate.approval"
"""Where the bot's card content names its approval (``adapters/matrix_card.py``)."""
T = TypeVar("T")


def run_chat_demo(console: Console, insecure: bool = False) -> int:
    """Run the Matrix chat demo; return 0 when the write was approved from chat and every view followed."""
    try:
        synapse_env()
    except SynapseMissing as missing:
        console.print(f"[bold red]{missing}[/bold red]")
        return 2
    root = Path(tempfile.mkdtemp(prefix="effectgate-chat-demo-"))
    console.print(Panel(f"workspace {root}", title="effectgate demo --chat matrix"))
    with contextlib.ExitStack() as held:
        with console.status("starting Synapse…"):
            hs = held.enter_context(synapse_server(root / "synapse"))
            bot, alice = hs.register("effectgate"), hs.register(APPROVER)
            room = hs.create_room(alice, name="approvals")
            hs.call("POST", f"/_matrix/client/v3/rooms/{room}/invite", {"user_id": bot.user_id}, alice.access_token)
        env = _env(root, hs, bot, room)
        with console.status("starting nats-server, redis-server, the services and the chat-ops bot…"):
            stack = held.enter_context(running_stack(root / "state", env, auth="open" if insecure else "secured"))
        console.print(f"[dim]Synapse {hs.url} · room {room} · logs {root / 'state' / 'logs'}[/dim]")
        failures = asyncio.run(_script(console, stack, hs, alice, room, bot.user_id))
    console.print(f"workspace kept: {root} (principals.toml with alice's Matrix id, synapse/, state/logs/chatops.log)")
    console.print("[bold green]demo finished[/bold green]" if not failures else f"[bold red]{failures}[/bold red]")
    return 0 if not failures else 1


def _env(root: Path, hs: Homeserver, bot: MatrixUser, room: str) -> dict[str, str]:
    """The stack's settings: alice mapped to her Matrix user, the bot on the approvals room."""
    principals = root / "principals.toml"
    text = (DEPLOY_DIR / "policy" / "principals.toml").read_text()
    mapped = text.replace(
        f"[approvers.{APPROVER}]\n", f'[approvers.{APPROVER}]\nmatrix = "@{APPROVER}:{hs.server_name}"\n'
    )
    principals.write_text(mapped)
    password = root / "matrix_password"
    password.write_text(bot.password)
    password.chmod(0o600)
    (root / "sandbox").mkdir()
    return {
        "EFFECTGATE_EXECUTOR_SANDBOX_ROOT": str(root / "sandbox"),
        **{f"EFFECTGATE_{s}_PRINCIPALS_FILE": str(principals) for s in ("POLICY", "APPROVALS", "CHATOPS")},
        "EFFECTGATE_CHATOPS_PLATFORM": "matrix",
        "EFFECTGATE_CHATOPS_MATRIX_HOMESERVER": hs.url,
        "EFFECTGATE_CHATOPS_MATRIX_USER": bot.user_id,
        "EFFECTGATE_CHATOPS_MATRIX_PASSWORD_FILE": str(password),
        "EFFECTGATE_CHATOPS_ROOMS": json.dumps({"operator": room}),
    }


async def _script(console: Console, stack: Stack, hs: Homeserver, alice: MatrixUser, room: str, bot: str) -> list[str]:
    client = AsyncClient(hs.url, alice.user_id)
    client.restore_login(alice.user_id, alice.device_id, alice.access_token)
    options = stack.connect_options(agent_user(AGENT))
    try:
        async with await ToolClient.connect(stack.nats_url, AGENT, public_keys=stack.public_keys, **options) as agent:
            arguments = {"path": "reports/weekly.md", "content": "# Weekly report\nAll systems nominal.\n"}
            key = f"report-{uuid.uuid4().hex[:8]}"
            request_id = await agent.submit("file_system", "write", arguments, idempotency_key=key)
            console.print(f"the agent asked to write reports/weekly.md (request {request_id}); waiting for its card…")
            card = await _eventually(lambda: _card(client, room, bot), 60.0)
            console.print(f"card {card['event_id']} is in the room; alice reacts ✅")
            await client.room_send(room, "m.reaction", _reaction(card["event_id"]))
            receipt = await agent.receipt(request_id, timeout_s=60.0)
            console.print(f"{receipt.event_id}: [bold]{receipt.outcome}[/bold]")
            failures = await _followed(client, room, bot, card["event_id"])
            console.print(await _transcript(client, room, bot))
            return (
                failures if receipt.outcome.value == "succeeded" else [f"the write ended {receipt.outcome}", *failures]
            )
    finally:
        await client.close()


def _reaction(event_id: str) -> dict[str, Any]:
    return {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": "✅"}}


async def _messages(client: AsyncClient, room: str) -> list[dict[str, Any]]:
    """The room's events, oldest first (as alice's client reads them)."""
    found = await client.room_messages(room, None, None, MessageDirection.back, 200)
    if not isinstance(found, RoomMessagesResponse):
        raise RuntimeError(f"cannot read the room: {found}")
    return [event.source for event in reversed(found.chunk)]


async def _card(client: AsyncClient, room: str, bot: str) -> dict[str, Any] | None:
    cards = [e for e in await _messages(client, room) if e["sender"] == bot and CARD_KEY in e.get("content", {})]
    return cards[0] if cards else None


async def _followed(client: AsyncClient, room: str, bot: str, card_id: str) -> list[str]:
    """Wait for the edited card and the outcome in the thread; name what never came."""

    async def both() -> bool | None:
        bodies = [_body(e) for e in await _messages(client, room) if e["sender"] == bot]
        return (any("approved by alice" in b for b in bodies) and any("succeeded" in b for b in bodies)) or None

    try:
        await _eventually(both, 30.0)
    except TimeoutError:
        return ["the card was not edited or the outcome not posted in its thread"]
    return []


def _body(event: dict[str, Any]) -> str:
    content = event.get("content", {})
    return str(content.get("m.new_content", content).get("body", ""))


async def _transcript(client: AsyncClient, room: str, bot: str) -> FittedTable:
    return transcript_table(await _messages(client, room))


def transcript_table(events: list[dict[str, Any]]) -> FittedTable:
    """The room's messages and reactions (Matrix events as JSON), one row each: who, what, the text."""
    columns = (Column("who"), Column("what"), Column("text", False, False))
    table = FittedTable("The approvals room, as alice sees it", columns, show_lines=True)
    for event in events:
        kind, content = event["type"], event.get("content", {})
        relation = content.get("m.relates_to", {})
        if kind == "m.reaction":
            cells = (event["sender"], "reaction", f"{relation.get('key')} on {relation.get('event_id')}")
        elif kind == "m.room.message":
            what = {"m.replace": "card edited", "m.thread": "in the card's thread"}.get(relation.get("rel_type"), "")
            cells = (event["sender"], what or ("card" if CARD_KEY in content else "message"), _body(event))
        else:
            continue
        table.add_row(*(plain_text(cell) for cell in cells))
    return table


async def _eventually(probe: Callable[[], Awaitable[T | None]], timeout_s: float) -> T:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        if (found := await probe()) is not None:
            return found
        await asyncio.sleep(0.3)
    raise TimeoutError(f"nothing after {timeout_s} s")
