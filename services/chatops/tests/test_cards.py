"""The card's content: folding, commands, reactions and the status it shows (pure rules)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from effectgate.chatops.answers import Action, command_of, reaction_action
from effectgate.chatops.domain import CardState, card_for, outcome_text, thread_parts
from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.vocabulary import Outcome


@pytest.mark.parametrize("length", [41, 500, 10_000])
def test_a_long_value_is_folded_and_kept_whole(make_requested: Any, length: int) -> None:
    text = "x" * (length - 1) + "END"
    card = card_for(make_requested(arguments={"a/b~c": {"body": text}, "short": "ok"}), fold_chars=40)
    assert len(card.folded) == 1
    assert card.folded[0].text == text
    assert card.folded[0].pointer == "/a~1b~0c/body"  # RFC 6901 escaping
    assert "[folded 1:" in card.arguments and "END" not in card.arguments
    assert '"short": "ok"' in card.arguments


def test_values_at_the_limit_are_shown_in_full(make_requested: Any) -> None:
    card = card_for(make_requested(arguments={"text": "y" * 40, "list": ["z" * 40]}), fold_chars=40)
    assert card.folded == ()
    assert json.loads(card.arguments) == {"list": ["z" * 40], "text": "y" * 40}


def test_arguments_are_canonical_and_every_fold_is_numbered(make_requested: Any) -> None:
    card = card_for(make_requested(arguments={"b": "q" * 50, "a": ["p" * 60, 1.0]}), fold_chars=40)
    assert [f.pointer for f in card.folded] == ["/a/0", "/b"]  # RFC 8785 key order
    assert [f.number for f in card.folded] == [1, 2]
    assert "1.0" not in card.arguments  # canonical number form: 1


def test_a_sealed_secret_is_never_on_the_card(make_requested: Any) -> None:
    sealed = {"$sealed": "A" * 80}
    card = card_for(make_requested(arguments={"token": sealed}), fold_chars=40)
    assert "AAAA" not in card.arguments and not card.folded
    assert "sealed" in card.arguments


def test_card_names_what_will_run(make_requested: Any) -> None:
    card = card_for(make_requested(approvals_required=2, risk_tier="high", side_effect_class="irreversible_write"), 40)
    assert card.call == "files@1.0.0.write"
    assert (card.risk_tier, card.side_effect_class) == ("high", "irreversible_write")
    assert card.request_hash12 == "abcdef012345"
    assert card.idempotency_key == "key-1"
    assert card.status_line() == "pending: 0 of 2 approvals"


@pytest.mark.parametrize(
    ("same_key", "state", "outcome", "expected"),
    [
        (True, "pending", None, "same idempotency key is pending as ap-1; approving this one runs nothing new"),
        (False, "granted", "succeeded", "another idempotency key is granted as ap-1, receipt rc-9: succeeded"),
    ],
)
def test_related_calls_are_warned_about(
    make_requested: Any, related: Any, same_key: bool, state: str, outcome: str | None, expected: str
) -> None:
    item = related(
        approval_id="ap-1", request_id="r0", state=state, same_key=same_key, receipt_id="rc-9", outcome=outcome
    )
    (line,) = card_for(make_requested(related=(item,)), 40).warnings()
    assert expected in line
    assert ("runs it again" in line) is not same_key


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("!approve ap-0123456789ab", (Action.APPROVE, "ap-0123456789ab", "")),
        ("!reject ap-0123456789ab not today", (Action.REJECT, "ap-0123456789ab", "not today")),
        ("/effectgate reject ap-0123456789ab  too\nrisky ", (Action.REJECT, "ap-0123456789ab", "too\nrisky")),
        ("!withdraw ap-0123456789ab", (Action.WITHDRAW, "ap-0123456789ab", "")),
        ("!approve", (Action.APPROVE, "", "")),
        ("please !approve ap-0123456789ab", None),
        ("!approved ap-0123456789ab", None),
        ("hello", None),
    ],
)
def test_commands(text: str, expected: tuple[Action, str, str] | None) -> None:
    assert command_of(text) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [("✅", Action.APPROVE), ("✅\ufe0f", Action.APPROVE), ("❌", Action.REJECT), ("👍", None), ("ok", None)],
)
def test_only_two_reactions_count(key: str, expected: Action | None) -> None:
    assert reaction_action(key) == expected


@pytest.mark.parametrize(("length", "parts"), [(0, 1), (1, 1), (200, 1), (201, 2), (1000, 5)])
def test_thread_parts_drop_nothing(length: int, parts: int) -> None:
    text = "".join(chr(65 + i % 26) for i in range(length))
    cut = thread_parts(text, 200)
    assert len(cut) == parts and "".join(cut) == text


def test_final_states_read_plainly(make_requested: Any) -> None:
    card = card_for(make_requested(), 40)
    granted = msgspec.structs.replace(card, state=CardState.GRANTED, answered_by=("alice", "bob"))
    rejected = msgspec.structs.replace(card, state=CardState.REJECTED, answered_by=("bob",), reason="no")
    assert granted.status_line() == "approved by alice, bob" and not granted.answerable
    assert rejected.status_line() == "rejected by bob: no"


@pytest.mark.parametrize("hidden", ["\u202e", "\u200b", "\u2066", "\x00", "\u2028"])
def test_invisible_and_direction_changing_characters_are_shown_escaped(make_requested: Any, hidden: str) -> None:
    card = card_for(make_requested(arguments={"path": f"gpj{hidden}.exe"}, idempotency_key=f"k{hidden}"), 40)
    escaped = f"\\u{ord(hidden):04x}"
    assert hidden not in card.arguments and escaped in card.arguments
    assert hidden not in card.idempotency_key and escaped in card.idempotency_key


@pytest.mark.parametrize("arguments", [{f"k{i}": i for i in range(5000)}, {"blob": ["x" * 30] * 2000}])
def test_an_argument_set_too_big_for_a_card_goes_whole_to_the_thread(make_requested: Any, arguments: Any) -> None:
    card = card_for(make_requested(arguments=arguments), fold_chars=200)
    assert len(card.arguments) < 200 and "in full in the thread" in card.arguments
    (whole,) = card.folded
    assert whole.pointer == "" and json.loads(whole.text) == arguments


@pytest.mark.parametrize(
    ("stored", "code", "line"),
    [
        (Outcome.FAILED, "tool_error", "request r2: replayed failed (tool_error); rc-r2, replay of r1"),
        (Outcome.DENIED, "approval_expired", "request r2: replayed denied (approval_expired); rc-r2, replay of r1"),
        (Outcome.SUCCEEDED, "ok", "request r2: replayed succeeded (ok); rc-r2, replay of r1"),
        (Outcome.UNCERTAIN, "tool_timeout", "request r2: replayed uncertain (tool_timeout); rc-r2, replay of r1"),
    ],
)
def test_a_replay_in_a_thread_reads_as_its_stored_outcome(stored: Outcome, code: str, line: str) -> None:
    replay = ReceiptIssued(
        event_id="rc-r2",
        occurred_at=datetime.now(UTC),
        request_id="r2",
        principal="p",
        outcome=Outcome.REPLAYED,
        reason_code=code,
        reason="why",
        replay_of="r1",
        replay_outcome=stored,
    )
    text = outcome_text(replay)
    assert text.startswith(line) and "did not run again" in text
    assert ("do not re-run it blindly" in text) is (stored is Outcome.UNCERTAIN)
