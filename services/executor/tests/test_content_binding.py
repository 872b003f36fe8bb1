"""A grant runs only while its file references name what the approval bound (checked right before the effect)."""

from __future__ import annotations

import asyncio
import hashlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.events import BoundRequest, request_hash
from effectgate.contracts.rpc.contents import ContentQuery, valid_contents
from effectgate.contracts.tools.contents import MAX_REFERENCES, ContentKind, ContentState
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor, descriptor_digest
from effectgate.contracts.vocabulary import Outcome, RiskTier, SideEffectClass, Verdict
from effectgate.executor.adapters.contents import ContentReader
from effectgate.executor.adapters.file_system import FileSystemTool
from effectgate.executor.effects.binding import ContentGuard, ContentReporter
from effectgate.executor.errors import ToolRefused
from effectgate.shared.consumer.acks import Settle

FILES = {"type": "array", "items": {"type": "string"}, "x-effectgate-file": True}
GIT = ToolDescriptor(
    name="mcp_git",
    version="1.0.0",
    adapter="mcp:git",
    operations={
        "git_add": OperationSpec(
            input_schema={"type": "object", "properties": {"files": FILES, "repo_path": {"const": "/r"}}},
            output_schema={},
            side_effect_class=SideEffectClass.REVERSIBLE_WRITE,
            risk_tier=RiskTier.MEDIUM,
        )
    },
)


def _digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def _read(root: Path, files: list[Any], adapter: str = "mcp:git", **kw: Any) -> tuple[ContentState, ...]:
    return ContentReader({adapter: root}, **kw).read(GIT, "git_add", {"files": files, "repo_path": "/r"})


def test_each_reference_is_read_as_what_it_names(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_bytes(b"approved\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_bytes(b"print(1)\n")
    (tmp_path / "link.txt").symlink_to("notes.txt")
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "pipe")
    files = [
        "notes.txt",
        "src/a.py",
        "missing.txt",
        "src",
        "link.txt",
        "fifo/pipe",
        "notes.txt/x",
        str(tmp_path / "src/a.py"),
        3,
    ]

    states = _read(tmp_path, files)

    kinds = [(s.pointer, s.path, s.kind, s.sha256, s.size_bytes, s.note) for s in states]
    assert kinds == [
        ("/files/0", "notes.txt", ContentKind.FILE, _digest(b"approved\n"), 9, ""),
        ("/files/1", "src/a.py", ContentKind.FILE, _digest(b"print(1)\n"), 9, ""),
        ("/files/2", "missing.txt", ContentKind.ABSENT, None, None, ""),
        ("/files/3", "src", ContentKind.DIRECTORY, None, None, ""),
        ("/files/4", "link.txt", ContentKind.FILE, _digest(b"approved\n"), 9, ""),  # followed inside the root
        ("/files/5", "fifo/pipe", ContentKind.OTHER, None, None, "not a regular file"),
        ("/files/6", "notes.txt/x", ContentKind.ABSENT, None, None, ""),  # a component is a file
        ("/files/7", str(tmp_path / "src/a.py"), ContentKind.FILE, _digest(b"print(1)\n"), 9, ""),
        ("/files/8", "", ContentKind.OTHER, None, None, "not a path"),
    ]


def test_a_path_leaving_the_root_binds_the_reference_only(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("x")
    (root / "escape").symlink_to(outside, target_is_directory=True)

    states = _read(root, ["../outside/secret.txt", "escape/secret.txt", str(outside / "secret.txt"), ""])

    assert [(s.kind, s.note) for s in states] == [(ContentKind.OTHER, "outside the file root")] * 3 + [
        (ContentKind.OTHER, "not a path")
    ]


def test_a_tool_whose_files_the_executor_cannot_see_binds_the_references_only(tmp_path: Path) -> None:
    states = _read(tmp_path, ["a", "b"], adapter="mcp:other")

    assert [(s.kind, s.note) for s in states] == [
        (ContentKind.UNSEEN, "the executor cannot see the files of mcp:git")
    ] * 2


def test_a_file_over_the_size_read_and_references_beyond_the_limit_bind_the_reference_only(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 101)
    (tmp_path / "small").write_bytes(b"x" * 100)

    big, small = _read(tmp_path, ["big", "small"], max_bytes=100)
    many = _read(tmp_path, ["small"] * (MAX_REFERENCES + 2))

    assert (big.kind, big.note, small.kind) == (ContentKind.OTHER, "over 100 bytes: not read", ContentKind.FILE)
    assert [s.kind for s in many[MAX_REFERENCES - 1 :]] == [ContentKind.FILE, ContentKind.OTHER, ContentKind.OTHER]
    assert many[-1].note == f"beyond the first {MAX_REFERENCES} references: not read"


def test_the_files_of_one_call_are_read_within_a_byte_budget(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / name).write_bytes(b"x" * 40)

    states = _read(tmp_path, ["a", "b", "c", "a"], call_max_bytes=100)

    assert [s.kind for s in states] == [ContentKind.FILE, ContentKind.FILE, ContentKind.OTHER, ContentKind.OTHER]
    assert states[2].note == "not read: the call's files are over 100 bytes in all"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda root: (root / "b.txt").write_text("rewritten"), "'b.txt' changed"),
        (lambda root: (root / "b.txt").unlink(), "'b.txt' was a file of 6 bytes, "),
        (lambda root: (root / "c.txt").write_text("planted"), "'c.txt' did not exist and now is a file"),
    ],
    ids=["rewritten", "deleted", "appeared"],
)
def test_the_guard_refuses_a_change_to_any_file_of_the_call_naming_it(tmp_path: Path, change: Any, says: str) -> None:
    (tmp_path / "a.txt").write_text("stays")
    (tmp_path / "b.txt").write_text("before")
    reader = ContentReader({"mcp:git": tmp_path})
    arguments = {"files": ["a.txt", "b.txt", "c.txt"], "repo_path": "/r"}
    guard = ContentGuard(reader, GIT, "git_add", arguments, reader.read(GIT, "git_add", arguments))
    guard()  # unchanged: passes

    change(tmp_path)
    with pytest.raises(ToolRefused) as refused:
        guard()

    assert refused.value.reason_code == "content_changed"
    assert says in refused.value.reason and refused.value.reason.endswith("nothing ran"), refused.value.reason


def test_the_write_guard_runs_after_the_new_bytes_are_ready_and_a_refusal_leaves_the_target_alone(
    tmp_path: Path,
) -> None:
    (tmp_path / "t.txt").write_text("old")
    seen: list[list[str]] = []

    def guard() -> None:
        seen.append(sorted(os.listdir(tmp_path)))
        raise ToolRefused("content_changed", "changed")

    tool = FileSystemTool(tmp_path)
    with pytest.raises(ToolRefused):
        asyncio.run(tool.call("write", {"path": "t.txt", "content": "new"}, guard))

    assert len(seen) == 1 and any(name.startswith(".effectgate-") for name in seen[0])  # only the rename remained
    assert sorted(os.listdir(tmp_path)) == ["t.txt"] and (tmp_path / "t.txt").read_text() == "old"


# --- the executor workflow: a grant whose files changed runs nothing -------------------------------------


def _pending(harness: Any, arguments: dict[str, Any], rid: str = "r1", key: str = "k1") -> Any:
    return harness.decision("write", arguments, rid=rid, key=key, verdict=Verdict.NEEDS_APPROVAL)


async def test_a_granted_overwrite_of_a_file_rewritten_since_the_approval_opened_runs_nothing(
    harness: Any, sandbox: Path
) -> None:
    decision = _pending(harness, {"path": "a.txt", "content": "approved overwrite"})
    grant = harness.grant(decision)  # binds a.txt as the approver saw it: "alpha"
    (sandbox / "a.txt").write_text("rewritten meanwhile")

    assert await harness.executor.on_granted(grant) is Settle.ACK

    issued = harness.bus.receipts["r1"]
    assert (issued.outcome, issued.reason_code) == (Outcome.REFUSED, "content_changed")
    assert "'a.txt' changed" in issued.reason, issued.reason
    assert (sandbox / "a.txt").read_text() == "rewritten meanwhile"
    assert os.listdir(sandbox) == ["a.txt"]  # no temporary file left


async def test_a_granted_write_whose_target_appeared_or_vanished_runs_nothing(harness: Any, sandbox: Path) -> None:
    appeared = _pending(harness, {"path": "new.txt", "content": "x"}, rid="r1")
    vanished = _pending(harness, {"path": "a.txt", "content": "x"}, rid="r2", key="k2")
    grants = (harness.grant(appeared), harness.grant(vanished))
    (sandbox / "new.txt").write_text("planted")
    (sandbox / "a.txt").unlink()

    for grant in grants:
        assert await harness.executor.on_granted(grant) is Settle.ACK

    assert harness.receipt("r1") == harness.receipt("r2") == (Outcome.REFUSED, "content_changed")
    assert (sandbox / "new.txt").read_text() == "planted" and not (sandbox / "a.txt").exists()


async def test_a_granted_write_over_unchanged_content_runs_once(harness: Any, sandbox: Path) -> None:
    decision = _pending(harness, {"path": "a.txt", "content": "approved overwrite"})

    assert await harness.executor.on_granted(harness.grant(decision)) is Settle.ACK

    assert harness.receipt("r1") == (Outcome.SUCCEEDED, "ok")
    assert (sandbox / "a.txt").read_text() == "approved overwrite"


async def test_a_grant_that_binds_nothing_of_a_file_the_call_names_runs_nothing(harness: Any, sandbox: Path) -> None:
    decision = _pending(harness, {"path": "a.txt", "content": "x"})

    assert await harness.executor.on_granted(harness.grant(decision, contents=())) is Settle.ACK

    issued = harness.bus.receipts["r1"]
    assert (issued.outcome, issued.reason_code) == (Outcome.REFUSED, "content_changed")
    assert "binds nothing" in issued.reason and (sandbox / "a.txt").read_text() == "alpha"


async def test_a_granted_read_of_a_file_rewritten_since_the_approval_opened_returns_nothing(
    harness: Any, sandbox: Path
) -> None:
    decision = harness.decision("read", {"path": "a.txt"}, verdict=Verdict.NEEDS_APPROVAL)
    grant = harness.grant(decision)
    (sandbox / "a.txt").write_text("swapped in")

    await harness.executor.on_granted(grant)

    issued = harness.bus.receipts["r1"]
    assert (issued.outcome, issued.reason_code, issued.result) == (Outcome.REFUSED, "content_changed", None)


# --- the answer to tg.executor.contents ------------------------------------------------------------------


class _Descriptors:
    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        return GIT if tool == GIT.name else None

    async def list(self) -> list[ToolDescriptor]:
        return [GIT]


def _query(files: list[str], digest: str | None = None) -> ContentQuery:
    bound = BoundRequest(
        principal="a1",
        tool=GIT.name,
        version=GIT.version,
        descriptor_digest=digest or descriptor_digest(GIT),
        operation="git_add",
        arguments={"files": files, "repo_path": "/r"},
    )
    return ContentQuery(principal="a1", request=bound, request_hash=request_hash(bound))


async def test_the_executor_answers_with_signed_states_bound_to_the_request(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("seen by the approver")
    key = Ed25519PrivateKey.generate()
    reporter = ContentReporter(_Descriptors(), ContentReader({"mcp:git": tmp_path}), key, lambda: datetime.now(UTC))
    query = _query(["notes.txt", "gone.txt"])

    answer = await reporter.answer_bytes(msgspec.json.encode(query))

    assert valid_contents(answer, query, key.public_key(), datetime.now(UTC))
    assert [(s.path, s.kind) for s in answer.contents] == [
        ("notes.txt", ContentKind.FILE),
        ("gone.txt", ContentKind.ABSENT),
    ]
    other = _query(["other.txt"])
    assert not valid_contents(answer, other, key.public_key(), datetime.now(UTC))
    assert not valid_contents(answer, query, Ed25519PrivateKey.generate().public_key(), datetime.now(UTC))


async def test_a_query_the_executor_cannot_vouch_for_is_refused(tmp_path: Path) -> None:
    reporter = ContentReporter(
        _Descriptors(), ContentReader({}), Ed25519PrivateKey.generate(), lambda: datetime.now(UTC)
    )
    tampered = msgspec.structs.replace(_query(["a"]), request_hash="sha256:" + "0" * 64)

    answers = [
        await reporter.answer_bytes(b"{not json"),
        await reporter.answer_bytes(b"x" * 300_000),
        await reporter.answer(tampered),
        await reporter.answer(_query(["a"], digest="sha256:other")),
    ]

    assert [(a.ok, a.reason_code, a.contents) for a in answers] == [
        (False, "malformed", ()),
        (False, "oversized", ()),
        (False, "hash_mismatch", ()),
        (False, "descriptor_mismatch", ()),
    ]
