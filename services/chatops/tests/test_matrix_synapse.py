"""The Matrix adapter against a real Synapse: cards as approvers read them, answers as approvers give them.

One Synapse for the module (``synapse`` fixture, root conftest). The bot owns the room
(power level 100, so ``@room`` in its text would notify if body text counted); alice and
bob are the entitled approvers, carol is in the room but not entitled.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import msgspec
import pytest
import pytest_asyncio
from nio import AsyncClient, RoomGetEventResponse

from effectgate.chatops.adapters.matrix.platform import MatrixChat
from effectgate.chatops.answers import Action, ChatAnswer
from effectgate.chatops.domain import Card, CardState
from effectgate.chatops.errors import ChatRefused, ChatUnavailable
from effectgate.devstack.synapse import Homeserver, MatrixUser

pytestmark = pytest.mark.matrix

HOSTILE = '@room look <a href="https://evil.example/">here</a> @carol:localhost <b>now</b>'
ARGUMENTS = json.dumps({"text": HOSTILE}, indent=2)


@dataclass
class World:
    hs: Homeserver
    bot: MatrixUser
    alice: MatrixUser
    bob: MatrixUser
    carol: MatrixUser
    room: str

    def chat(self, state_dir: Path | None = None, password: str | None = None) -> MatrixChat:
        mentions = {"alice": self.alice.user_id, "bob": self.bob.user_id}
        return MatrixChat(
            self.hs.url,
            self.bot.user_id,
            password or self.bot.password,
            "EFFECTGATEBOT",
            {self.room},
            mentions,
            state_dir,
            poll_timeout_s=2.0,
            max_backoff_s=1.0,
        )


class Tags(HTMLParser):
    """The tags, link targets and text of an HTML body."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        self.links: list[str] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.names.add(tag)
        self.links += [value or "" for name, value in attrs if name == "href"]

    def handle_data(self, data: str) -> None:
        self.text += data


class Sink:
    """Collects the answers the adapter hands over."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[ChatAnswer] = asyncio.Queue()

    async def __call__(self, answer: ChatAnswer) -> None:
        await self.queue.put(answer)

    async def next(self, timeout_s: float = 15.0) -> ChatAnswer:
        return await asyncio.wait_for(self.queue.get(), timeout_s)


def card(approval_id: str = "ap-0123456789ab", **fields: Any) -> Card:
    base: dict[str, Any] = {
        "approval_id": approval_id,
        "request_ids": ("r-1",),
        "principal": "agent-<i>a</i>",
        "call": "files@1.0.0.write",
        "side_effect_class": "irreversible_write",
        "risk_tier": "high",
        "policy_id": "irreversible-write-approval",
        "approver_role": "operator",
        "approvers": ("alice", "bob", "dave"),
        "approvals_required": 1,
        "idempotency_key": "key-@room",
        "request_hash12": "abcdef012345",
        "expires_at": datetime(2026, 11, 30, 12, 15, tzinfo=UTC) + timedelta(days=365),
        "arguments": ARGUMENTS,
    }
    return Card(**{**base, **fields})


@pytest.fixture(scope="module")
def world(synapse: Homeserver) -> World:
    bot, alice, bob, carol = (synapse.register(name) for name in ("bot", "alice", "bob", "carol"))
    room = synapse.create_room(bot, [alice, bob, carol])
    return World(synapse, bot, alice, bob, carol, room)


@pytest_asyncio.fixture(loop_scope="session")
async def bot(world: World) -> AsyncIterator[MatrixChat]:
    chat = world.chat()
    yield chat
    await chat.stop()


async def as_user(world: World, user: MatrixUser) -> AsyncClient:
    client = AsyncClient(world.hs.url, user.user_id)
    client.restore_login(user.user_id, user.device_id, user.access_token)
    return client


async def read_event(world: World, user: MatrixUser, event_id: str) -> dict[str, Any]:
    client = await as_user(world, user)
    try:
        response = await client.room_get_event(world.room, event_id)
        assert isinstance(response, RoomGetEventResponse), response
        source: dict[str, Any] = response.event.source
        return source
    finally:
        await client.close()


async def send_as(world: World, user: MatrixUser, kind: str, content: dict[str, Any]) -> str:
    client = await as_user(world, user)
    try:
        response = await client.room_send(world.room, kind, content)
        return str(response.event_id)
    finally:
        await client.close()


def react(target: str, key: str) -> dict[str, Any]:
    return {"m.relates_to": {"rel_type": "m.annotation", "event_id": target, "key": key}}


def highlights(world: World, user: MatrixUser) -> list[str]:
    answer = world.hs.call("GET", "/_matrix/client/v3/notifications?only=highlight", token=user.access_token)
    return [item["event"]["event_id"] for item in answer["notifications"]]


async def test_an_approver_reads_the_card_with_only_the_entitled_approvers_mentioned(
    world: World, bot: MatrixChat
) -> None:
    event_id = await bot.post_card(world.room, card(), "card-mentions")
    event = await read_event(world, world.alice, event_id)
    content = event["content"]
    assert event["sender"] == world.bot.user_id
    assert content["m.mentions"] == {"user_ids": [world.alice.user_id, world.bob.user_id]}
    tags = Tags()
    tags.feed(content["formatted_body"])
    assert tags.names <= {"p", "strong", "code", "ul", "li", "pre", "a"}  # no <b>, <i> from the agent
    assert tags.links == ["https://matrix.to/#/@alice:localhost", "https://matrix.to/#/@bob:localhost"]
    assert ARGUMENTS in tags.text and "agent-<i>a</i>" in tags.text and "key-@room" in tags.text
    for shown in ("files@1.0.0.write", "irreversible_write", "high", "irreversible-write-approval", "operator"):
        assert shown in tags.text
    assert "abcdef012345" in content["body"] and "UTC" in content["body"] and "React ✅" in content["body"]
    await asyncio.sleep(0.5)  # push actions are computed as the event is persisted
    assert event_id in highlights(world, world.alice) and event_id in highlights(world, world.bob)
    assert event_id not in highlights(world, world.carol)  # named in the arguments, and @room: no ping


async def test_a_card_retried_with_its_transaction_id_is_posted_once_even_after_a_restart(
    world: World, bot: MatrixChat
) -> None:
    first = await bot.post_card(world.room, card("ap-00000000000a"), "card-ap-00000000000a")
    again = await bot.post_card(world.room, card("ap-00000000000a"), "card-ap-00000000000a")
    restarted = world.chat()
    try:
        after_restart = await restarted.post_card(world.room, card("ap-00000000000a"), "card-ap-00000000000a")
        assert await restarted.find_card(world.room, "ap-00000000000a") == first
        assert await restarted.find_card(world.room, "ap-0000000000ff") is None
    finally:
        await restarted.stop()
    assert first == again == after_restart


async def test_an_edit_replaces_the_card_and_notifies_nobody_again(world: World, bot: MatrixChat) -> None:
    event_id = await bot.post_card(world.room, card("ap-00000000000b"), "card-ap-00000000000b")
    granted = card("ap-00000000000b", state=CardState.GRANTED, votes=("alice",), answered_by=("alice",))
    await bot.edit_card(world.room, event_id, granted)
    relations = world.hs.call(
        "GET",
        f"/_matrix/client/v1/rooms/{urllib.parse.quote(world.room)}/relations/{urllib.parse.quote(event_id)}/m.replace",
        token=world.alice.access_token,
    )
    (edit,) = relations["chunk"]
    assert edit["content"]["m.mentions"] == {}
    new = edit["content"]["m.new_content"]
    assert "approved by alice" in new["body"] and "Answers are closed." in new["body"] and "React" not in new["body"]


async def test_reactions_reach_the_sink_with_their_sender_and_a_redaction_withdraws(
    world: World, bot: MatrixChat
) -> None:
    sink = Sink()
    card_id = await bot.post_card(world.room, card("ap-00000000000c"), "card-ap-00000000000c")
    await bot.start(sink)
    await asyncio.sleep(0.5)  # the first sync finds "now"
    await send_as(world, world.carol, "m.reaction", react(card_id, "👍"))  # not an answer
    approval = await send_as(world, world.alice, "m.reaction", react(card_id, "✅"))
    answer = await sink.next()
    assert (answer.chat_user, answer.action, answer.approval_id) == (world.alice.user_id, Action.APPROVE, None)
    assert (answer.room, answer.message_id) == (world.room, card_id)
    await send_as(world, world.bob, "m.reaction", react(card_id, "❌\ufe0f"))
    assert (await sink.next()).action is Action.REJECT
    client = await as_user(world, world.alice)
    try:
        await client.room_redact(world.room, approval)
    finally:
        await client.close()
    withdrawn = await sink.next()
    assert (withdrawn.chat_user, withdrawn.action, withdrawn.message_id) == (
        world.alice.user_id,
        Action.WITHDRAW,
        card_id,
    )


async def test_a_command_in_the_thread_is_an_answer_and_the_reply_lands_in_the_thread(
    world: World, bot: MatrixChat
) -> None:
    sink = Sink()
    card_id = await bot.post_card(world.room, card("ap-00000000000d"), "card-ap-00000000000d")
    await bot.start(sink)
    await asyncio.sleep(0.5)
    thread = {"rel_type": "m.thread", "event_id": card_id}
    command = {"msgtype": "m.text", "body": "!reject ap-00000000000d too risky", "m.relates_to": thread}
    await send_as(world, world.bob, "m.room.message", {"msgtype": "m.text", "body": "hello, no command"})
    await send_as(world, world.bob, "m.room.message", command)
    answer = await sink.next()
    assert (answer.action, answer.approval_id, answer.note) == (Action.REJECT, "ap-00000000000d", "too risky")
    assert (answer.chat_user, answer.message_id) == (world.bob.user_id, card_id)
    await bot.reply(answer, "ap-00000000000d: refused <b>@room</b>")
    await bot.post_in_thread(world.room, card_id, "part 1 of 1", "fold-d-1")
    await bot.post_in_thread(world.room, card_id, "part 1 of 1", "fold-d-1")  # retried: stored once
    relations = world.hs.call(
        "GET",
        f"/_matrix/client/v1/rooms/{urllib.parse.quote(world.room)}/relations/{urllib.parse.quote(card_id)}/m.thread",
        token=world.bob.access_token,
    )
    from_bot = [e["content"] for e in relations["chunk"] if e["sender"] == world.bot.user_id]
    assert len(from_bot) == 2
    reply = next(c for c in from_bot if c["body"].startswith("ap-00000000000d"))
    assert reply["m.mentions"] == {"user_ids": [world.bob.user_id]}
    assert "&lt;b&gt;@room&lt;/b&gt;" in reply["formatted_body"]


async def test_unknown_rooms_and_rooms_without_an_invite_are_refused(world: World, bot: MatrixChat) -> None:
    with pytest.raises(ChatRefused):
        await bot.post_card("!nowhere:localhost", card(), "card-nowhere")
    private = world.hs.create_room(world.carol, [], name="carol only")
    with pytest.raises(ChatRefused):
        await bot.post_card(private, card(), "card-private")


async def test_a_wrong_password_is_refused(world: World) -> None:
    chat = world.chat(password="not the password")
    try:
        with pytest.raises(ChatRefused, match="M_FORBIDDEN"):
            await chat.post_card(world.room, card(), "card-wrong-password")
    finally:
        await chat.stop()


async def test_a_rate_limit_is_unavailable_with_the_servers_retry_after(world: World) -> None:
    admin, slow = world.hs.register("admin-rl", admin=True), world.hs.register("slowbot")
    path = f"/_synapse/admin/v1/users/{urllib.parse.quote(slow.user_id)}/override_ratelimit"
    world.hs.call("POST", path, {"messages_per_second": 1, "burst_count": 1}, admin.access_token)
    room = world.hs.create_room(world.bot, [slow], name="slow")
    chat = MatrixChat(world.hs.url, slow.user_id, slow.password, "SLOW", (), {})
    answer = ChatAnswer(platform="matrix", chat_user=slow.user_id, action=Action.APPROVE, approval_id=None, room=room)
    try:
        with pytest.raises(ChatUnavailable) as limited:
            for number in range(5):  # at most one a second
                await chat.reply(answer, f"message {number}")
    finally:
        await chat.stop()
    assert "M_LIMIT_EXCEEDED" in limited.value.reason and 0 < (limited.value.retry_after_s or 0) <= 2


async def test_answers_given_while_the_bot_was_down_are_read_when_it_starts_again(world: World, tmp_path: Path) -> None:
    chat, sink = world.chat(tmp_path), Sink()
    card_id = await chat.post_card(world.room, card("ap-00000000000e"), "card-ap-00000000000e")
    await chat.start(sink)
    await asyncio.sleep(0.5)
    await send_as(world, world.bob, "m.room.message", {"msgtype": "m.text", "body": "!approve ap-00000000000e"})
    assert (await sink.next()).approval_id == "ap-00000000000e"
    await asyncio.sleep(0.5)  # the position after the command is saved
    await chat.stop()  # the bot is down
    # the long poll the bot left open ends with this message: Synapse keeps that answer for the next start
    await send_as(world, world.carol, "m.room.message", {"msgtype": "m.text", "body": "chatter"})
    await send_as(world, world.alice, "m.reaction", react(card_id, "✅"))
    for number in range(120):  # more than one sync returns: the homeserver cuts the timeline
        await send_as(world, world.carol, "m.room.message", {"msgtype": "m.text", "body": f"chatter {number}"})
    await send_as(world, world.bob, "m.room.message", {"msgtype": "m.text", "body": "!withdraw ap-00000000000e"})
    restarted, later = world.chat(tmp_path), Sink()
    await restarted.start(later)
    try:
        first, second = await later.next(), await later.next()
    finally:
        await restarted.stop()
    assert (first.chat_user, first.action, first.message_id) == (world.alice.user_id, Action.APPROVE, card_id)
    assert (second.chat_user, second.action) == (world.bob.user_id, Action.WITHDRAW)  # the old command not again
    assert later.queue.empty()
    saved = msgspec.json.decode((tmp_path / "matrix-sync.json").read_bytes())
    assert saved["since"] and saved["reactions"]


async def test_synapse_down_is_unavailable_and_everything_works_again_when_it_returns(
    world: World, bot: MatrixChat
) -> None:
    sink = Sink()
    card_id = await bot.post_card(world.room, card("ap-00000000000f"), "card-ap-00000000000f")
    await bot.start(sink)
    await asyncio.sleep(0.5)
    world.hs.stop()
    try:
        with pytest.raises(ChatUnavailable):
            await bot.post_card(world.room, card("ap-000000000010"), "card-ap-000000000010")
        await asyncio.sleep(1.0)  # the sync loop fails meanwhile, and goes on
    finally:
        world.hs.start()
    posted = await bot.post_card(world.room, card("ap-000000000010"), "card-ap-000000000010")
    assert posted != card_id
    await send_as(world, world.bob, "m.reaction", react(card_id, "✅"))
    answer = await sink.next(timeout_s=30)
    assert (answer.chat_user, answer.message_id) == (world.bob.user_id, card_id)
