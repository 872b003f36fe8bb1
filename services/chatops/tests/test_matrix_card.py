"""Matrix contents of cards and thread posts: inert agent text, mentions of the entitled approvers only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from html.parser import HTMLParser
from typing import Any

from effectgate.chatops.adapters.matrix.card import CARD_KEY, card_content, edit_content, thread_content
from effectgate.chatops.domain import Card, CardState
from effectgate.contracts.events import Related

MENTIONS = {"alice": "@alice:hs", "bob": "@bob:hs", "mallory": "@mallory:hs"}


class Tags(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__()
        self.names: set[str] = set()
        self.links: list[str] = []
        self.text = ""
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.names.add(tag)
        self.links += [value or "" for name, value in attrs if name == "href"]

    def handle_data(self, data: str) -> None:
        self.text += data


def card(**fields: Any) -> Card:
    base: dict[str, Any] = {
        "approval_id": "ap-0123456789ab",
        "request_ids": ("r-1",),
        "principal": "a1-00",
        "call": "files@1.0.0.write",
        "side_effect_class": "irreversible_write",
        "risk_tier": "high",
        "policy_id": "irreversible-write-approval",
        "approver_role": "operator",
        "approvers": ("alice", "bob", "dave"),
        "approvals_required": 2,
        "idempotency_key": "<img src=x>@room",
        "request_hash12": "abcdef012345",
        "expires_at": datetime(2026, 11, 30, 13, 15, tzinfo=timezone(timedelta(hours=1))),
        "arguments": '{\n  "text": "</code></pre><a href=\\"https://x.example\\">@room</a>"\n}',
    }
    return Card(**{**base, **fields})


def test_a_card_shows_every_field_and_mentions_only_its_mapped_entitled_approvers() -> None:
    content = card_content(card(votes=("alice",)), MENTIONS)
    tags = Tags(content["formatted_body"])
    assert content["m.mentions"] == {"user_ids": ["@alice:hs", "@bob:hs"]}  # dave is unmapped, mallory not entitled
    assert tags.links == ["https://matrix.to/#/@alice:hs", "https://matrix.to/#/@bob:hs"]
    assert tags.names <= {"p", "strong", "code", "ul", "li", "pre", "a"}
    assert card().arguments in tags.text and "<img src=x>@room" in tags.text  # shown as text, not markup
    for shown in ("a1-00", "files@1.0.0.write", "irreversible_write", "high", "irreversible-write-approval"):
        assert shown in tags.text and shown in content["body"]
    assert "operator" in tags.text and "abcdef012345" in tags.text and "r-1" in tags.text
    assert "2026-11-30 12:15:00 UTC" in tags.text  # expiry in UTC
    assert "pending: 1 of 2 approvals (alice)" in content["body"] and "React ✅" in content["body"]
    assert content[CARD_KEY] == {"approval_id": "ap-0123456789ab"}


def test_duplicate_warnings_are_on_the_card() -> None:
    related = Related(
        approval_id="ap-00000000000a", request_id="r-0", state="granted", same_key=True, receipt_id="rc-1", outcome="ok"
    )
    content = card_content(card(related=(related,)), MENTIONS)
    assert "WARNING: the same call under the same idempotency key is granted as ap-00000000000a" in content["body"]
    assert "⚠ WARNING" in content["formatted_body"]


def test_an_answered_card_says_answers_are_closed_and_its_edit_pings_nobody() -> None:
    done = card(state=CardState.REJECTED, answered_by=("bob",), reason="<script>no</script>")
    edit = edit_content("$card", done, MENTIONS)
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$card"}
    assert edit["m.mentions"] == {}
    new = edit["m.new_content"]
    assert "Answers are closed." in new["body"] and "React" not in new["body"]
    assert "rejected by bob: <script>no</script>" in Tags(new["formatted_body"]).text
    assert "script" not in Tags(new["formatted_body"]).names


def test_a_thread_post_is_preformatted_inert_text_that_notifies_only_whom_it_names() -> None:
    content = thread_content("$card", "@room <b>x</b> https://x.example", notify=("@bob:hs",))
    assert content["m.relates_to"]["rel_type"] == "m.thread" and content["m.relates_to"]["event_id"] == "$card"
    assert content["m.mentions"] == {"user_ids": ["@bob:hs"]}
    tags = Tags(content["formatted_body"])
    assert tags.names == {"pre", "code"} and tags.text == "@room <b>x</b> https://x.example"
    assert thread_content("$card", "x")["m.mentions"] == {"user_ids": []}
    assert card().expires_at.astimezone(UTC).hour == 12
