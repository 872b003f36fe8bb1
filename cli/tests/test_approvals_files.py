"""``approvals list`` says, per file the call names, what it held when the approval opened and what is bound."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from effectgate.cli.render.approvals import approvals_blocks


def _shown(item: dict[str, object]) -> str:
    out = StringIO()
    Console(file=out, width=120, color_system=None).print(approvals_blocks([item]))
    return out.getvalue()


def _file_rows(item: dict[str, object]) -> list[str]:
    rows = [line.strip().split(None, 1) for line in _shown(item).splitlines()]
    return [row[1] for row in rows if row and row[0] == "file"]


def _pending(contents: object) -> dict[str, object]:
    request = {"principal": "a1-00", "tool": "mcp_git", "version": "1.0.1", "operation": "git_add"}
    request |= {"arguments": {"files": ["notes.txt"]}, "descriptor_digest": "sha256:" + "d" * 64}
    return {
        "approval_id": "ap-1",
        "request_id": "r-1",
        "principal": "a1-00",
        "request": request,
        "approver_role": "operator",
        "expires_at": "2026-11-29T12:00:00Z",
        "request_hash": "sha256:" + "a" * 64,
        "contents": contents,
    }


def test_each_file_is_a_row_saying_whether_its_content_is_bound() -> None:
    contents = [
        {"pointer": "/files/0", "path": "notes.txt", "kind": "file", "sha256": "sha256:" + "c" * 64, "size_bytes": 3},
        {"pointer": "/files/1", "path": "gone", "kind": "absent"},
        {"pointer": "/files/2", "path": "src", "kind": "directory"},
        {"pointer": "/files/3", "path": "r", "kind": "unseen", "note": "the executor cannot see the files of mcp:x"},
    ]

    assert _file_rows(_pending(contents)) == [
        "'notes.txt': a file of 3 bytes, sha256 cccccccccccc — bound",
        "'gone': absent — bound (the call is refused if it appears)",
        "'src': a directory — binds the reference only",
        "'r': the executor cannot see the files of mcp:x — binds the reference only",
    ]


def test_a_call_naming_no_file_has_no_file_row_and_an_unreadable_listing_says_so() -> None:
    assert _file_rows(_pending([])) == []
    [unreadable] = _file_rows(_pending([{"kind": "file"}]))
    assert "file states are unreadable" in unreadable
