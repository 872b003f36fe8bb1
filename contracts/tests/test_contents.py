"""What a grant binds of its files: the comparison at dispatch names what changed; the card says what is bound."""

from __future__ import annotations

import hashlib

import pytest

from effectgate.contracts.tools.contents import (
    CARD_LINES,
    ContentKind,
    ContentState,
    content_line,
    content_lines,
    first_change,
)


def _file(pointer: str, path: str, data: bytes) -> ContentState:
    digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
    return ContentState(pointer=pointer, path=path, kind=ContentKind.FILE, sha256=digest, size_bytes=len(data))


def _kind(pointer: str, path: str, kind: ContentKind, note: str = "") -> ContentState:
    return ContentState(pointer=pointer, path=path, kind=kind, note=note)


NOTES = _file("/files/0", "notes.txt", b"approved text\n")
OTHER = _file("/files/1", "other.txt", b"untouched\n")


def test_the_same_states_are_no_change() -> None:
    assert first_change((NOTES, OTHER), (NOTES, OTHER)) is None
    assert first_change((), ()) is None


@pytest.mark.parametrize(
    ("now", "says"),
    [
        (_file("/files/0", "notes.txt", b"rewritten\n"), "'notes.txt' changed (a file of 14 bytes, "),
        (_kind("/files/0", "notes.txt", ContentKind.ABSENT), "'notes.txt' was a file of 14 bytes"),
        (_kind("/files/0", "notes.txt", ContentKind.DIRECTORY), "and is now a directory"),
        (_kind("/files/0", "notes.txt", ContentKind.OTHER, "a symlink"), "and is now a symlink"),
    ],
    ids=["rewritten", "deleted", "now-a-directory", "now-a-symlink"],
)
def test_a_change_to_one_of_several_files_is_named(now: ContentState, says: str) -> None:
    why = first_change((NOTES, OTHER), (now, OTHER))

    assert why is not None and says in why and why.endswith("since the approval was opened"), why


def test_a_rewrite_names_both_digests_and_sizes() -> None:
    rewritten = _file("/files/0", "notes.txt", b"rewritten\n")
    why = first_change((NOTES,), (rewritten,)) or ""

    assert NOTES.sha256 and rewritten.sha256
    assert NOTES.sha256.removeprefix("sha256:")[:12] in why and rewritten.sha256.removeprefix("sha256:")[:12] in why
    assert "14 bytes" in why and "10 bytes" in why


def test_a_missing_file_that_appears_is_a_change() -> None:
    absent = _kind("/path", "new.txt", ContentKind.ABSENT)

    why = first_change((absent,), (_file("/path", "new.txt", b"planted"),))

    assert why is not None and why.startswith("'new.txt' did not exist and now is a file of 7 bytes"), why


def test_a_reference_the_approval_holds_nothing_for_is_refused() -> None:
    why = first_change((), (NOTES,))

    assert why == "'notes.txt': the approval binds nothing of what it names"


def test_a_bound_reference_the_call_no_longer_names_is_refused() -> None:
    assert first_change((NOTES, OTHER), (NOTES,)) == "'other.txt': the call no longer names it"


def test_a_state_the_executor_cannot_see_compares_as_what_it_is() -> None:
    unseen = _kind("/files/0", "a", ContentKind.UNSEEN, "the executor cannot see the files of mcp:remote")

    assert first_change((unseen,), (unseen,)) is None
    assert first_change((unseen,), (_file("/files/0", "a", b"x"),)) is not None


def test_the_card_says_which_content_is_bound_and_which_reference_only() -> None:
    lines = [
        content_line(NOTES),
        content_line(_kind("/path", "new.txt", ContentKind.ABSENT)),
        content_line(_kind("/files/2", "src", ContentKind.DIRECTORY)),
        content_line(_kind("/files/3", "link", ContentKind.OTHER, "a symlink")),
        content_line(_kind("/files/4", "x", ContentKind.UNSEEN, "the executor cannot see the files of mcp:remote")),
        content_line(_kind("/files/5", "", ContentKind.OTHER, "not a path")),
    ]
    digest = (NOTES.sha256 or "").removeprefix("sha256:")[:12]

    assert lines == [
        f"'notes.txt': a file of 14 bytes, sha256 {digest} — bound",
        "'new.txt': absent — bound (the call is refused if it appears)",
        "'src': a directory — binds the reference only",
        "'link': a symlink — binds the reference only",
        "'x': the executor cannot see the files of mcp:remote — binds the reference only",
        "/files/5: not a path — binds the reference only",
    ]


def test_a_long_list_of_files_is_summed_up_after_the_first_lines() -> None:
    states = [_file(f"/files/{i}", f"f{i}", b"x") for i in range(CARD_LINES + 3)]
    states.append(_kind(f"/files/{CARD_LINES + 3}", "dir", ContentKind.DIRECTORY))

    lines = content_lines(states)

    assert len(lines) == CARD_LINES + 1
    assert lines[-1] == "… and 4 more references (3 bound, 1 the reference only)"


def test_a_very_long_path_is_shortened_on_the_card() -> None:
    line = content_line(_kind("/path", "d/" * 200, ContentKind.ABSENT))

    assert len(line) < 200 and "…" in line
