"""Which Matrix events are answers, and the sync state kept across restarts (no homeserver)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from effectgate.chatops.adapters.matrix.answers import Reaction, SyncState, answer_of
from effectgate.chatops.answers import Action

ROOM, BOT, ALICE, CAROL = "!r:hs", "@bot:hs", "@alice:hs", "@carol:hs"


def reaction(event_id: str, key: str, sender: str = ALICE, target: str = "$card") -> dict[str, Any]:
    relation = {"rel_type": "m.annotation", "event_id": target, "key": key}
    return {"type": "m.reaction", "event_id": event_id, "sender": sender, "content": {"m.relates_to": relation}}


def redaction(redacts: str, sender: str = ALICE, in_content: bool = False) -> dict[str, Any]:
    where = {"content": {"redacts": redacts}} if in_content else {"redacts": redacts, "content": {}}
    return {"type": "m.room.redaction", "event_id": "$red", "sender": sender, **where}


def text(body: str, sender: str = ALICE, relation: dict[str, Any] | None = None) -> dict[str, Any]:
    content: dict[str, Any] = {"msgtype": "m.text", "body": body}
    if relation:
        content["m.relates_to"] = relation
    return {"type": "m.room.message", "event_id": "$cmd", "sender": sender, "content": content}


@pytest.fixture
def state() -> SyncState:
    return SyncState(None)


def test_a_check_mark_approves_and_a_cross_rejects_the_reacted_to_message(state: SyncState) -> None:
    approve = answer_of(ROOM, reaction("$r1", "✅"), BOT, state)
    reject = answer_of(ROOM, reaction("$r2", "❌", sender=CAROL), BOT, state)
    assert approve is not None and reject is not None
    assert (approve.action, approve.chat_user, approve.message_id, approve.approval_id) == (
        Action.APPROVE,
        ALICE,
        "$card",
        None,
    )
    assert (reject.action, reject.chat_user) == (Action.REJECT, CAROL)


@pytest.mark.parametrize(
    "event",
    [
        reaction("$r", "👍"),
        reaction("$r", "✅", sender=BOT),
        {"type": "m.reaction", "event_id": "$r", "sender": ALICE, "content": "not a dict"},
        {
            "type": "m.reaction",
            "event_id": "$r",
            "sender": ALICE,
            "content": {"m.relates_to": {"rel_type": "m.reference"}},
        },
        {
            "type": "m.reaction",
            "event_id": "$r",
            "sender": ALICE,
            "content": {"m.relates_to": {"rel_type": "m.annotation", "key": 5}},
        },
        {"type": "m.reaction", "sender": 7, "content": {}},
        text("hello there"),
        text("!approve ap-0123456789ab", sender=BOT),
        text("* !approve ap-0123456789ab", relation={"rel_type": "m.replace", "event_id": "$cmd0"}),
        {
            "type": "m.room.message",
            "event_id": "$n",
            "sender": ALICE,
            "content": {"msgtype": "m.notice", "body": "!approve ap-0123456789ab"},
        },
        {
            "type": "m.room.message",
            "event_id": "$n",
            "sender": ALICE,
            "content": {"msgtype": "m.text", "body": ["!approve"]},
        },
        {"type": "m.room.member", "event_id": "$m", "sender": ALICE, "content": {"membership": "join"}},
    ],
)
def test_other_and_malformed_events_are_no_answers(state: SyncState, event: dict[str, Any]) -> None:
    assert answer_of(ROOM, event, BOT, state) is None


def test_only_the_reactors_own_redaction_of_a_check_mark_withdraws(state: SyncState) -> None:
    for event_id, key in (("$yes", "✅"), ("$no", "❌"), ("$other", "✅")):
        answer_of(ROOM, reaction(event_id, key), BOT, state)
    assert answer_of(ROOM, redaction("$no"), BOT, state) is None  # a rejection is final
    assert answer_of(ROOM, redaction("$other", sender=CAROL), BOT, state) is None  # a moderator's removal
    assert answer_of(ROOM, redaction("$unknown"), BOT, state) is None
    withdraw = answer_of(ROOM, redaction("$yes", in_content=True), BOT, state)  # room version 11 puts it in content
    assert withdraw is not None
    assert (withdraw.action, withdraw.chat_user, withdraw.message_id) == (Action.WITHDRAW, ALICE, "$card")
    assert answer_of(ROOM, redaction("$yes"), BOT, state) is None  # once


def test_commands_in_the_room_in_a_thread_and_as_a_rich_reply(state: SyncState) -> None:
    plain = answer_of(ROOM, text("!approve ap-0123456789ab"), BOT, state)
    threaded = answer_of(
        ROOM,
        text("!reject ap-0123456789ab not now, later", relation={"rel_type": "m.thread", "event_id": "$card"}),
        BOT,
        state,
    )
    reply = answer_of(ROOM, text("> <@bob:hs> the card\n> more\n\n!withdraw ap-0123456789ab"), BOT, state)
    assert plain is not None and threaded is not None and reply is not None
    assert (plain.action, plain.approval_id, plain.message_id) == (Action.APPROVE, "ap-0123456789ab", "$cmd")
    assert (threaded.action, threaded.note, threaded.message_id) == (Action.REJECT, "not now, later", "$card")
    assert (reply.action, reply.approval_id) == (Action.WITHDRAW, "ap-0123456789ab")


def test_the_state_survives_a_restart_and_a_damaged_file_starts_from_now(tmp_path: Path) -> None:
    state = SyncState(tmp_path, keep=2)
    state.since = "s42"
    for number in range(3):
        state.remember(f"$r{number}", Reaction(ROOM, "$card", ALICE, Action.APPROVE))
    state.save()
    again = SyncState(tmp_path)
    assert again.since == "s42" and list(again.reactions) == ["$r1", "$r2"]  # the oldest forgotten
    assert again.reactions["$r2"] == Reaction(ROOM, "$card", ALICE, Action.APPROVE)
    (tmp_path / "matrix-sync.json").write_text("{not json")
    damaged = SyncState(tmp_path)
    assert damaged.since is None and not damaged.reactions
