"""Approving from Matrix, end to end: the whole stack, the chat-ops bot and a real Synapse.

One Synapse and one stack for the module. alice made the approvals room and invited the
bot (which joins by itself: the room is configured), bob, carol and mallory. alice and bob
are operators mapped to their Matrix users; carol is mapped but only an ``sre``; mallory is
in the room but no approver at all. Everything a person sees is read back through their
own Matrix client.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio
from nio import AsyncClient, MessageDirection, RoomMessagesResponse
from nio.api import RelationshipType

from effectgate.devstack.synapse import Homeserver, MatrixUser

pytestmark = [pytest.mark.e2e, pytest.mark.matrix]

T = TypeVar("T")
EFFECTGATE = str(Path(sys.executable).parent / "effectgate")
CARD_KEY = "dev.effectgate.approval"


@dataclass
class People:
    bot: MatrixUser
    alice: MatrixUser
    bob: MatrixUser
    carol: MatrixUser
    mallory: MatrixUser
    room: str


@pytest.fixture(scope="module")
def people(synapse: Homeserver) -> People:
    bot, alice, bob, carol, mallory = (synapse.register(n) for n in ("bot", "alice", "bob", "carol", "mallory"))
    room = synapse.create_room(alice, [bob, carol, mallory], name="approvals")
    synapse.call("POST", f"/_matrix/client/v3/rooms/{room}/invite", {"user_id": bot.user_id}, alice.access_token)
    return People(bot, alice, bob, carol, mallory, room)


QUORUM_AGENT = "quorum-agent"
QUORUM_POLICY = """
@id("two-operators-for-the-quorum-agent")
@approver_role("operator")
@approvals_required("2")
permit (principal is Agent, action == Action::"execute_with_approval", resource is Tool)
when { principal.roles.contains("quorum") && context.side_effect == "REVERSIBLE_WRITE" };
"""


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Any, synapse: Homeserver, people: People, repo_root: Path) -> dict[str, str]:
    """The chat-ops bot on Matrix; alice, bob and carol mapped to their Matrix users; one agent needs two operators."""
    text = e2e_paths.principals.read_text()
    for person in ("alice", "bob", "carol"):
        mapped = f'[approvers.{person}]\nmatrix = "@{person}:{synapse.server_name}"\n'
        text = text.replace(f"[approvers.{person}]\n", mapped)
    text += f'\n[principals.{QUORUM_AGENT}]\nautonomy = 1\nroles = ["agent", "quorum"]\n'
    e2e_paths.principals.write_text(text)
    policy = e2e_paths.state.parent / "quorum-policy.cedar"
    policy.write_text((repo_root / "deploy/policy/policy.cedar").read_text() + QUORUM_POLICY)
    password = e2e_paths.state.parent / "matrix_password"
    password.write_text(people.bot.password)
    password.chmod(0o600)
    return {
        "EFFECTGATE_POLICY_POLICY_FILE": str(policy),
        "EFFECTGATE_CHATOPS_PLATFORM": "matrix",
        "EFFECTGATE_CHATOPS_PRINCIPALS_FILE": str(e2e_paths.principals),
        "EFFECTGATE_CHATOPS_MATRIX_HOMESERVER": synapse.url,
        "EFFECTGATE_CHATOPS_MATRIX_USER": people.bot.user_id,
        "EFFECTGATE_CHATOPS_MATRIX_PASSWORD_FILE": str(password),
        "EFFECTGATE_CHATOPS_ROOMS": json.dumps({"operator": people.room}),
    }


class View:
    """One person's Matrix client on the approvals room."""

    def __init__(self, hs: Homeserver, user: MatrixUser, room: str, bot: str) -> None:
        self.client = AsyncClient(hs.url, user.user_id)
        self.client.restore_login(user.user_id, user.device_id, user.access_token)
        self.room, self.bot = room, bot

    async def cards(self, approval_id: str) -> list[dict[str, Any]]:
        """Every card the bot posted for ``approval_id`` (as events), newest first."""
        found = await self.client.room_messages(
            self.room, None, None, MessageDirection.back, 200, {"senders": [self.bot], "types": ["m.room.message"]}
        )
        assert isinstance(found, RoomMessagesResponse), found
        return [
            e.source for e in found.chunk if e.source["content"].get(CARD_KEY, {}).get("approval_id") == approval_id
        ]

    async def card(self, approval_id: str, timeout_s: float = 30.0) -> dict[str, Any]:
        """The card of ``approval_id`` once the bot has posted it."""
        return (await _eventually(lambda: self.cards(approval_id), timeout_s))[0]

    async def related(self, event_id: str, kind: RelationshipType) -> list[dict[str, Any]]:
        """The bot's events related to ``event_id`` by ``kind``, oldest first."""
        events = [e.source async for e in self.client.room_get_event_relations(self.room, event_id, kind)]
        return [e for e in reversed(events) if e["sender"] == self.bot]

    async def thread_line(self, card_id: str, *needles: str, timeout_s: float = 30.0) -> str:
        """The first bot message in the card's thread that contains every one of ``needles``."""

        async def probe() -> str | None:
            bodies = [e["content"]["body"] for e in await self.related(card_id, RelationshipType.thread)]
            return next((b for b in bodies if all(n in b for n in needles)), None)

        return await _eventually(probe, timeout_s)

    async def edited_to(self, card_id: str, needle: str, timeout_s: float = 30.0) -> dict[str, Any]:
        """The card's latest content once an edit contains ``needle``."""

        async def probe() -> dict[str, Any] | None:
            edits = await self.related(card_id, RelationshipType.replacement)
            latest = edits[-1]["content"]["m.new_content"] if edits else None
            return latest if latest and needle in latest["body"] else None

        return await _eventually(probe, timeout_s)

    async def react(self, event_id: str, key: str) -> str:
        relation = {"rel_type": "m.annotation", "event_id": event_id, "key": key}
        sent = await self.client.room_send(self.room, "m.reaction", {"m.relates_to": relation})
        return str(sent.event_id)

    async def unreact(self, reaction_id: str) -> None:
        await self.client.room_redact(self.room, reaction_id)

    async def say_in_thread(self, card_id: str, body: str) -> None:
        content = {"msgtype": "m.text", "body": body, "m.relates_to": {"rel_type": "m.thread", "event_id": card_id}}
        await self.client.room_send(self.room, "m.room.message", content)


async def _eventually(probe: Callable[[], Awaitable[T | None]], timeout_s: float) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        if found := await probe():
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"not seen in {timeout_s}s")
        await asyncio.sleep(0.2)


@pytest_asyncio.fixture(scope="module")
async def views(synapse: Homeserver, people: People, stack: Any) -> AsyncIterator[dict[str, View]]:
    """alice's, bob's, carol's and mallory's Matrix clients (after the stack, with its bot, is up)."""
    opened = {
        name: View(synapse, getattr(people, name), people.room, people.bot.user_id)
        for name in ("alice", "bob", "carol", "mallory")
    }
    yield opened
    for view in opened.values():
        await view.client.close()


async def test_a_reaction_approves_a_write_the_card_follows_and_the_outcome_lands_in_its_thread(
    gate: Any, views: dict[str, View], people: People, new_id: Any
) -> None:
    agent, name = gate.agent(), new_id("chat-") + ".txt"
    request_id = await gate.submit(agent, "write", {"path": name, "content": "@room <b>hello</b>"})
    pending = await gate.pending(request_id)
    card = await views["alice"].card(pending["approval_id"])
    content = card["content"]
    assert set(content["m.mentions"]["user_ids"]) == {people.alice.user_id, people.bob.user_id}
    assert f'"path": "{name}"' in content["body"] and "&lt;b&gt;hello&lt;/b&gt;" in content["formatted_body"]
    assert pending["request_hash"].removeprefix("sha256:")[:12] in content["body"]

    await views["alice"].react(card["event_id"], "✅")
    receipt = await gate.receipt(agent, request_id, timeout_s=30)
    assert receipt.outcome == "succeeded", receipt.reason
    assert (gate.paths.sandbox / name).read_text() == "@room <b>hello</b>"
    edited = await views["bob"].edited_to(card["event_id"], "approved by alice")
    assert "Answers are closed." in edited["body"]
    line = await views["bob"].thread_line(card["event_id"], request_id, "succeeded", receipt.event_id)
    assert line.startswith(f"request {request_id}: succeeded")


async def test_reactions_of_people_who_may_not_approve_are_refused_in_the_thread_and_change_nothing(
    gate: Any, views: dict[str, View], people: People, new_id: Any
) -> None:
    agent, name = gate.agent(), new_id("refused-") + ".txt"
    request_id = await gate.submit(agent, "write", {"path": name, "content": "x"})
    approval_id = (await gate.pending(request_id))["approval_id"]
    card_id = (await views["alice"].card(approval_id))["event_id"]

    await views["mallory"].react(card_id, "✅")  # no approver at all
    await views["alice"].thread_line(card_id, people.mallory.user_id, "not a mapped approver")
    await views["carol"].react(card_id, "✅")  # an approver, but not an operator
    await views["alice"].thread_line(card_id, "refused", "not_entitled")
    await gate.settle()
    assert await gate.is_pending(request_id)
    assert not (gate.paths.sandbox / name).exists()

    await views["bob"].say_in_thread(card_id, f"!reject {approval_id} not on a Friday")
    receipt = await gate.receipt(agent, request_id, timeout_s=30)
    assert (receipt.outcome, receipt.reason_code) == ("denied", "approval_rejected")
    edited = await views["alice"].edited_to(card_id, "rejected by bob")
    assert "not on a Friday" in edited["body"]
    assert not (gate.paths.sandbox / name).exists()


async def test_a_quorum_of_two_from_reactions_and_a_removed_reaction_before_it_changes_nothing(
    gate: Any, views: dict[str, View], new_id: Any
) -> None:
    name = new_id("quorum-") + ".txt"
    request_id = await gate.submit(QUORUM_AGENT, "write", {"path": name, "content": "two keys"})
    card_id = (await views["alice"].card((await gate.pending(request_id))["approval_id"]))["event_id"]

    reaction = await views["alice"].react(card_id, "✅")
    await views["bob"].edited_to(card_id, "pending: 1 of 2 approvals (alice)")
    await views["alice"].unreact(reaction)  # alice takes it back before the quorum: as if she never voted
    await views["bob"].edited_to(card_id, "pending: 0 of 2 approvals")
    await views["bob"].react(card_id, "✅")
    await views["alice"].edited_to(card_id, "pending: 1 of 2 approvals (bob)")
    await gate.settle()
    assert await gate.is_pending(request_id) and not (gate.paths.sandbox / name).exists()

    await views["alice"].react(card_id, "✅")
    receipt = await gate.receipt(QUORUM_AGENT, request_id, timeout_s=30)
    assert receipt.outcome == "succeeded", receipt.reason
    edited = await views["carol"].edited_to(card_id, "approved by bob, alice")
    assert "Answers are closed." in edited["body"]
    assert (gate.paths.sandbox / name).read_text() == "two keys"


async def test_an_answer_given_while_the_bot_is_down_counts_when_it_is_back_and_the_card_is_not_posted_again(
    gate: Any, views: dict[str, View], new_id: Any
) -> None:
    agent, name = gate.agent(), new_id("restart-") + ".txt"
    request_id = await gate.submit(agent, "write", {"path": name, "content": "y"})
    approval_id = (await gate.pending(request_id))["approval_id"]
    card_id = (await views["alice"].card(approval_id))["event_id"]
    await asyncio.sleep(1.0)  # the bot's sync position is saved after its next sync

    gate.stack.stop("chatops", kill=True)
    await views["alice"].react(card_id, "✅")
    await asyncio.sleep(1.0)
    assert await gate.is_pending(request_id)
    gate.stack.start("chatops")

    receipt = await gate.receipt(agent, request_id, timeout_s=60)
    assert receipt.outcome == "succeeded", receipt.reason
    await views["alice"].edited_to(card_id, "approved by alice")
    assert len(await views["alice"].cards(approval_id)) == 1


async def test_while_synapse_is_down_the_call_waits_the_cli_works_and_the_card_comes_when_synapse_returns(
    gate: Any, views: dict[str, View], synapse: Homeserver, new_id: Any
) -> None:
    agent, name = gate.agent(), new_id("down-") + ".txt"
    synapse.stop()
    try:
        request_id = await gate.submit(agent, "write", {"path": name, "content": "z"})
        approval_id = (await gate.pending(request_id))["approval_id"]
        listed = await asyncio.to_thread(_effectgate, gate.stack, "approvals", "list")
        assert listed.returncode == 0 and approval_id in listed.stdout, listed.stderr
        await asyncio.sleep(2.0)
        assert await gate.is_pending(request_id)
        assert await gate.count(f"tg.receipt.{agent}.{request_id}") == 0
    finally:
        synapse.start()

    card_id = (await views["alice"].card(approval_id, timeout_s=90))["event_id"]
    await views["alice"].react(card_id, "✅")
    receipt = await gate.receipt(agent, request_id, timeout_s=60)
    assert receipt.outcome == "succeeded", receipt.reason
    assert len(await views["alice"].cards(approval_id)) == 1


def _effectgate(stack: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EFFECTGATE_")}
    env.update({"NATS_URL": stack.nats_url, "EFFECTGATE_STATE_DIR": str(stack.state_dir), "COLUMNS": "400"})
    return subprocess.run([EFFECTGATE, *args], env=env, capture_output=True, text=True, timeout=60)
