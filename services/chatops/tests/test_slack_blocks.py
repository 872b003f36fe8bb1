"""The Slack card and what Slack interactions mean: rendering is inert, payloads are read defensively."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl

import pytest

from effectgate.chatops.adapters.slack.answers import click_of, command_answer, rejection_answer
from effectgate.chatops.adapters.slack.platform import blocks as blocks
from effectgate.chatops.answers import Action
from effectgate.chatops.domain import CardState
from effectgate.contracts.events import Related
from effectgate.devstack.slack_requests import block_action, slash_command, view_submission

HOSTILE = "<@U999> <!channel> <https://evil.example|click> *bold* &amp; @here"
MENTIONS = {"alice": "U0ALICE", "bob": "U0BOB"}
PARSED = {"user", "broadcast", "link", "channel", "usergroup", "team", "emoji", "date"}


def rendered(card: Any, mentions: dict[str, str] = MENTIONS) -> list[dict[str, Any]]:
    return [block.to_dict() for block in blocks.card_blocks(card, mentions, part_chars=3000)]


def walk(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def texts(value: Any) -> str:
    return "".join(node["text"] for node in walk(value) if node.get("type") in ("text", "plain_text"))


def form_body(body: str) -> dict[str, Any]:
    fields = dict(parse_qsl(body))
    return json.loads(fields["payload"]) if "payload" in fields else fields


def test_agent_text_is_shown_literally_and_only_entitled_approvers_are_mentioned(make_card: Any) -> None:
    card = make_card(args={"note": HOSTILE}, idempotency_key=HOSTILE, principal="agent-<!here>")
    shown = rendered(card)
    assert {n["user_id"] for n in walk(shown) if n.get("type") == "user"} == {"U0ALICE", "U0BOB"}
    assert not [n for n in walk(shown) if n.get("type") in PARSED - {"user"}]
    assert not [n for n in walk(shown) if n.get("type") == "mrkdwn"], "no mrkdwn in the blocks at all"
    assert json.dumps(HOSTILE)[1:-1] in texts(shown)  # the arguments, verbatim in a preformatted block
    assert f"Idempotency key: {HOSTILE}" in texts(shown)
    fallback = blocks.card_text(card, MENTIONS)
    assert "U999" not in fallback and "<!" not in fallback and "evil" not in fallback
    assert "<@U0ALICE>" in fallback and "<@U0BOB>" in fallback


def test_the_card_shows_every_fact_an_approver_needs(make_card: Any) -> None:
    related = Related(approval_id="ap-aaaaaaaaaaaa", request_id="req-0", state="granted", same_key=False)
    card = make_card(args={"path": "notes.txt"}, related=(related,), approvals_required=2, votes=("alice",))
    shown = texts(rendered(card))
    for fact in (
        "Principal: agent-7",
        "Call: files@1.0.0.write_file",
        "Side effect: irreversible_write, risk high",
        "Policy: writes-need-approval",
        "Approver role: operator (2 approvals needed)",
        "Idempotency key: key-1",
        "Request hash: 0123456789ab",
        "Expires: 2030-01-02 03:04:05 UTC",
        '"path": "notes.txt"',
        "an identical call under another idempotency key is granted as ap-aaaaaaaaaaaa",
        "Status: pending: 1 of 2 approvals (alice)",
    ):
        assert fact in shown
    preformatted = [n for n in walk(rendered(card)) if n.get("type") == "rich_text_preformatted"]
    assert texts(preformatted) == card.arguments


def test_buttons_carry_the_approval_id_while_answerable_and_go_when_answered(make_card: Any) -> None:
    pending = [n for n in walk(rendered(make_card())) if n.get("type") == "button"]
    assert [(b["action_id"], b["value"]) for b in pending] == [
        ("approve", "ap-0123456789ab"),
        ("reject", "ap-0123456789ab"),
    ]
    granted = rendered(make_card(state=CardState.GRANTED, answered_by=("alice",)))
    assert not [n for n in walk(granted) if n.get("type") in ("button", "actions")]
    assert "Answers are closed." in texts(granted) and "Approved: ap-0123456789ab" in texts(granted)
    assert "approved by alice" in texts(granted)


def test_an_approver_without_a_valid_slack_id_is_named_not_mentioned(make_card: Any) -> None:
    shown = rendered(make_card(), {"alice": "<!channel>", "bob": "U0BOB"})
    assert {n["user_id"] for n in walk(shown) if n.get("type") == "user"} == {"U0BOB"}
    assert "alice (no Slack user mapped)" in texts(shown)
    assert "<!channel>" not in blocks.card_text(make_card(), {"alice": "<!channel>"})


def test_long_arguments_are_split_into_preformatted_parts_nothing_dropped(make_card: Any) -> None:
    card = make_card(args={f"k{i}": "v" * 150 for i in range(60)})
    parts = [n for n in walk(rendered(card)) if n.get("type") == "rich_text_preformatted"]
    assert len(parts) > 1 and all(len(texts(p)) <= 3000 for p in parts)
    assert "".join(texts(p) for p in parts) == card.arguments


def test_mrkdwn_escape() -> None:
    assert blocks.escape("<@U1> & <!here>") == "&lt;@U1&gt; &amp; &lt;!here&gt;"


def test_a_click_names_the_user_card_channel_and_approval() -> None:
    click = click_of(form_body(block_action("U0ALICE", "C0CARDS", "17.000001", "approve", "ap-0123456789ab", "t1")))
    assert click is not None and click.trigger_id == "t1"
    assert click.answer.action is Action.APPROVE and click.answer.approval_id == "ap-0123456789ab"
    assert (click.answer.chat_user, click.answer.room, click.answer.message_id) == ("U0ALICE", "C0CARDS", "17.000001")


@pytest.mark.parametrize(
    "body",
    [
        {"type": "block_actions", "user": {"id": "U1"}, "actions": []},
        {"type": "block_actions", "user": {"id": 5}, "channel": {"id": "C"}, "container": {}, "actions": []},
        form_body(block_action("U1", "C1", "1.1", "launch_missiles", "ap-0123456789ab")),
    ],
)
def test_a_click_of_another_shape_means_nothing(body: dict[str, Any]) -> None:
    assert click_of(body) is None


def test_the_slash_command_parses_action_id_and_reason() -> None:
    answer = command_answer(form_body(slash_command("U0BOB", "C0CARDS", "reject ap-0123456789ab not <!here> today")))
    assert answer is not None and answer.action is Action.REJECT
    assert (answer.approval_id, answer.note, answer.message_id) == ("ap-0123456789ab", "not <!here> today", "")
    assert command_answer(form_body(slash_command("U0BOB", "C0CARDS", "approve"))) is None
    assert command_answer(form_body(slash_command("U0BOB", "C0CARDS", "please approve"))) is None
    assert command_answer(form_body(slash_command("U0BOB", "C0CARDS", "approve everything"))) is None


def test_the_reject_dialog_returns_to_its_card_with_the_reason() -> None:
    view = blocks.reject_view("ap-0123456789ab", "C0CARDS", "17.000001").to_dict()
    body = form_body(view_submission("U0BOB", view["callback_id"], view["private_metadata"], "  wrong file "))
    answer = rejection_answer(body)
    assert answer is not None and answer.action is Action.REJECT and answer.note == "wrong file"
    assert (answer.approval_id, answer.room, answer.message_id) == ("ap-0123456789ab", "C0CARDS", "17.000001")
    assert rejection_answer(form_body(view_submission("U0BOB", "effectgate_reject", "not json", None))) is None
