"""The card says what the call's files held when the approval opened, and which ones bind the reference only."""

from __future__ import annotations

from typing import Any

import msgspec

from effectgate.chatops.adapters.matrix.card import card_content
from effectgate.chatops.adapters.slack.platform import blocks
from effectgate.chatops.domain import card_for, listed_card
from effectgate.contracts.rpc.approvals import PendingApproval
from effectgate.contracts.tools.contents import ContentKind, ContentState

NOTES = ContentState(
    pointer="/files/0", path="notes.txt", kind=ContentKind.FILE, sha256="sha256:" + "ab" * 32, size_bytes=9
)
NEW = ContentState(pointer="/files/1", path="new.txt", kind=ContentKind.ABSENT)
REMOTE = ContentState(
    pointer="/files/2", path="x", kind=ContentKind.UNSEEN, note="the executor cannot see the files of mcp:remote"
)
LINES = (
    "'notes.txt': a file of 9 bytes, sha256 abababababab — bound",
    "'new.txt': absent — bound (the call is refused if it appears)",
    "'x': the executor cannot see the files of mcp:remote — binds the reference only",
)


def test_the_card_lists_each_file_and_whether_its_content_is_bound(make_requested: Any) -> None:
    card = card_for(make_requested(contents=(NOTES, NEW, REMOTE)), fold_chars=40)

    assert card.contents == LINES


def test_a_call_naming_no_file_has_no_file_lines(make_requested: Any) -> None:
    card = card_for(make_requested(), fold_chars=40)

    assert card.contents == ()
    assert "files (as the approval binds them)" not in card_content(card, {})["body"]


def test_an_invisible_character_in_a_path_is_shown_escaped(make_requested: Any) -> None:
    hidden = msgspec.structs.replace(NEW, path="safe\u202etxt.exe")

    [line] = card_for(make_requested(contents=(hidden,)), fold_chars=40).contents

    assert "\u202e" not in line and "safe" in line


def test_matrix_and_slack_show_the_lines_as_inert_text(make_requested: Any) -> None:
    hostile = msgspec.structs.replace(NEW, path="<a href='https://x.example'>@room</a>")
    card = card_for(make_requested(contents=(NOTES, hostile)), fold_chars=40)

    matrix = card_content(card, {})
    slack = [block.to_dict() for block in blocks.card_blocks(card, {}, part_chars=3000)]

    assert "files (as the approval binds them):\n" + LINES[0] in matrix["body"]
    assert "<a href=" not in matrix["formatted_body"] and "&lt;a href=" in matrix["formatted_body"]
    shown = str(slack)
    assert LINES[0] in shown and "Files (as the approval binds them)" in shown and "mrkdwn" not in shown


def test_a_card_built_at_resync_from_the_listing_shows_the_same_lines(make_requested: Any) -> None:
    event = make_requested(contents=(NOTES, NEW, REMOTE))
    listed = msgspec.convert(
        {**msgspec.to_builtins(event), "votes": [], "joined": []}, PendingApproval, from_attributes=False
    )

    assert listed_card(listed, fold_chars=40).contents == LINES
