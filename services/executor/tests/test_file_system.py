"""The sandboxed file_system tool: happy paths, every refusal, and its descriptor."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import Any

import jsonschema_rs
import msgspec
import pytest

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.executor.adapters.file_system import INLINE_READ_BYTES, FileSystemTool
from effectgate.executor.errors import ExecutorError, ToolFailed, ToolRefused

DESCRIPTOR_PATH = Path(__file__).resolve().parents[3] / "deploy" / "tools" / "file_system.json"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    (sandbox / "hello.txt").write_text("héllo\n", encoding="utf-8")
    (sandbox / "docs").mkdir()
    (sandbox / "docs" / "a.md").write_text("# a\n", encoding="utf-8")
    return sandbox


@pytest.fixture
def tool(root: Path) -> FileSystemTool:
    return FileSystemTool(root)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    elsewhere = tmp_path / "outside"
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("top secret", encoding="utf-8")
    return elsewhere


def files_under(path: Path) -> set[str]:
    return {p.relative_to(path).as_posix() for p in path.rglob("*")}


async def refused(tool: FileSystemTool, operation: str, arguments: dict[str, Any]) -> ToolRefused:
    with pytest.raises(ToolRefused) as caught:
        await tool.call(operation, arguments)
    return caught.value


# --- happy paths -------------------------------------------------------------------------------


async def test_read_returns_content_size_and_sha256(tool: FileSystemTool) -> None:
    result = await tool.call("read", {"path": "hello.txt"})
    data = "héllo\n".encode()
    assert result == {
        "path": "hello.txt",
        "content": "héllo\n",
        "size_bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


async def test_read_normalises_an_inner_dotdot_that_stays_inside(tool: FileSystemTool) -> None:
    result = await tool.call("read", {"path": "docs/../docs/./a.md"})
    assert result["path"] == "docs/a.md"
    assert result["content"] == "# a\n"


async def test_list_sorts_entries_by_name_with_kinds_and_sizes(tool: FileSystemTool, root: Path) -> None:
    os.symlink("hello.txt", root / "link")
    result = await tool.call("list", {})
    assert result == {
        "path": ".",
        "entries": [
            {"name": "docs", "kind": "dir", "size_bytes": 0},
            {"name": "hello.txt", "kind": "file", "size_bytes": 7},
            {"name": "link", "kind": "symlink", "size_bytes": 0},
        ],
    }


async def test_list_of_a_subdirectory(tool: FileSystemTool) -> None:
    result = await tool.call("list", {"path": "docs"})
    assert result["path"] == "docs"
    assert [entry["name"] for entry in result["entries"]] == ["a.md"]


async def test_write_creates_then_replaces_atomically(tool: FileSystemTool, root: Path) -> None:
    first = await tool.call("write", {"path": "new/deep/f.txt", "content": "one"})
    assert first == {
        "path": "new/deep/f.txt",
        "size_bytes": 3,
        "sha256": hashlib.sha256(b"one").hexdigest(),
        "created": True,
    }
    second = await tool.call("write", {"path": "new/deep/f.txt", "content": "two!"})
    assert second["created"] is False
    assert second["size_bytes"] == 4
    assert (root / "new" / "deep" / "f.txt").read_text() == "two!"
    assert os.listdir(root / "new" / "deep") == ["f.txt"], "no temporary file left behind"


async def test_write_keeps_the_mode_of_a_replaced_file(tool: FileSystemTool, root: Path) -> None:
    (root / "hello.txt").chmod(0o600)
    await tool.call("write", {"path": "hello.txt", "content": "x"})
    assert (root / "hello.txt").stat().st_mode & 0o777 == 0o600


async def test_a_symlink_inside_the_root_is_followed(tool: FileSystemTool, root: Path) -> None:
    os.symlink("docs", root / "docs-link")
    os.symlink("hello.txt", root / "hello-link")
    read = await tool.call("read", {"path": "docs-link/a.md"})
    assert read["path"] == "docs/a.md"
    written = await tool.call("write", {"path": "hello-link", "content": "via link"})
    assert written["path"] == "hello.txt"
    assert (root / "hello.txt").read_text() == "via link"
    assert (root / "hello-link").is_symlink()


async def test_a_root_given_through_a_symlink_still_works(tmp_path: Path, root: Path) -> None:
    os.symlink(root, tmp_path / "alias")
    tool = FileSystemTool(tmp_path / "alias")
    assert (await tool.call("read", {"path": "hello.txt"}))["content"] == "héllo\n"


# --- refusals ----------------------------------------------------------------------------------

HOSTILE_PATHS = [
    pytest.param("../x", id="dotdot"),
    pytest.param("a/../../x", id="inner-dotdot-escape"),
    pytest.param("/etc/passwd", id="absolute"),
    pytest.param("docs/\x00/a.md", id="nul-byte"),
    pytest.param("", id="empty"),
    pytest.param("../outside/secret.txt", id="dotdot-to-sibling"),
]


@pytest.mark.parametrize("operation", ["read", "list", "write"])
@pytest.mark.parametrize("path", HOSTILE_PATHS)
async def test_hostile_paths_are_refused_before_any_effect(
    tool: FileSystemTool, tmp_path: Path, operation: str, path: str
) -> None:
    before = files_under(tmp_path)
    arguments = {"path": path, "content": "pwned"} if operation == "write" else {"path": path}
    error = await refused(tool, operation, arguments)
    assert error.reason_code == "path_outside_sandbox"
    assert error.argument == "path"
    assert "'path'" in error.reason
    assert files_under(tmp_path) == before


async def test_an_absolute_path_inside_the_root_is_refused(tool: FileSystemTool, root: Path) -> None:
    error = await refused(tool, "read", {"path": str(root / "hello.txt")})
    assert error.reason_code == "path_outside_sandbox"
    assert "absolute" in error.reason


async def test_a_sibling_whose_name_starts_with_the_root_name_is_outside(tool: FileSystemTool, root: Path) -> None:
    evil = root.parent / (root.name + "-evil")
    evil.mkdir()
    (evil / "f").write_text("evil", encoding="utf-8")
    for operation, arguments in [
        ("read", {"path": f"../{evil.name}/f"}),
        ("list", {"path": f"../{evil.name}"}),
        ("write", {"path": f"../{evil.name}/g", "content": "x"}),
    ]:
        assert (await refused(tool, operation, arguments)).reason_code == "path_outside_sandbox"
    assert sorted(os.listdir(evil)) == ["f"]


async def test_a_file_symlink_leaving_the_root_is_refused(tool: FileSystemTool, root: Path, outside: Path) -> None:
    os.symlink(outside / "secret.txt", root / "innocent.txt")
    assert (await refused(tool, "read", {"path": "innocent.txt"})).reason_code == "path_outside_sandbox"
    error = await refused(tool, "write", {"path": "innocent.txt", "content": "overwritten"})
    assert error.reason_code == "path_outside_sandbox"
    assert (outside / "secret.txt").read_text() == "top secret"


async def test_a_relative_symlink_climbing_out_is_refused(tool: FileSystemTool, root: Path) -> None:
    os.symlink("../outside", root / "up")
    (root.parent / "outside").mkdir()
    assert (await refused(tool, "list", {"path": "up"})).reason_code == "path_outside_sandbox"


async def test_a_directory_symlink_leaving_the_root_is_refused_at_any_level(
    tool: FileSystemTool, root: Path, outside: Path
) -> None:
    os.symlink(outside, root / "docs" / "escape")
    for operation, path in [("read", "docs/escape/secret.txt"), ("list", "docs/escape")]:
        assert (await refused(tool, operation, {"path": path})).reason_code == "path_outside_sandbox"


async def test_write_through_an_escaping_directory_symlink_writes_nothing_outside(
    tool: FileSystemTool, root: Path, outside: Path
) -> None:
    os.symlink(outside, root / "escape")
    for path in ["escape/new.txt", "escape/sub/dir/new.txt", "escape/secret.txt"]:
        error = await refused(tool, "write", {"path": path, "content": "pwned"})
        assert error.reason_code == "path_outside_sandbox"
    assert files_under(outside) == {"secret.txt"}
    assert (outside / "secret.txt").read_text() == "top secret"


@pytest.mark.parametrize(
    ("operation", "path", "swapped"),
    [("write", "docs/new.txt", "docs"), ("list", "docs", "docs"), ("read", "hello.txt", "hello.txt")],
)
async def test_a_symlink_swapped_in_after_the_check_is_not_followed(
    tool: FileSystemTool,
    root: Path,
    outside: Path,
    monkeypatch: pytest.MonkeyPatch,
    operation: str,
    path: str,
    swapped: str,
) -> None:
    checked = tool._resolve

    def check_then_swap(arguments: dict[str, Any], key: str, default: str | None = None) -> Any:
        rel = checked(arguments, key, default)
        (root / swapped).rename(root / (swapped + ".old"))
        os.symlink(outside / ("secret.txt" if operation == "read" else ""), root / swapped)
        return rel

    monkeypatch.setattr(tool, "_resolve", check_then_swap)
    arguments = {"path": path, "content": "pwned"} if operation == "write" else {"path": path}
    error = await refused(tool, operation, arguments)
    assert error.reason_code == "path_outside_sandbox"
    assert files_under(outside) == {"secret.txt"}
    assert (outside / "secret.txt").read_text() == "top secret"


async def test_write_replaces_a_final_symlink_swapped_in_instead_of_following_it(
    tool: FileSystemTool, root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = tool._resolve

    def check_then_swap(arguments: dict[str, Any], key: str, default: str | None = None) -> Any:
        rel = checked(arguments, key, default)
        (root / "hello.txt").unlink()
        os.symlink(outside / "secret.txt", root / "hello.txt")
        return rel

    monkeypatch.setattr(tool, "_resolve", check_then_swap)
    with pytest.raises(ToolRefused) as caught:
        await tool.call("write", {"path": "hello.txt", "content": "new"})
    assert caught.value.reason_code == "not_a_file"
    assert (outside / "secret.txt").read_text() == "top secret"


# --- hard links: a second name for a file that may live anywhere -------------------------------


def hard_link_cases(root: Path, outside: Path) -> dict[str, tuple[Path, str, str]]:
    """Case name -> (the file that gets a second name, the path the agent asks for, the path a refusal names)."""
    os.link(outside / "secret.txt", root / "innocent.txt")
    os.link(outside / "secret.txt", root / "docs" / "deep.txt")
    os.link(root / "hello.txt", root / "twin.txt")
    os.symlink("innocent.txt", root / "via-symlink.txt")
    return {
        "to-outside": (outside / "secret.txt", "innocent.txt", "innocent.txt"),
        "in-subdirectory": (outside / "secret.txt", "docs/deep.txt", "docs/deep.txt"),
        "twin-inside": (root / "hello.txt", "twin.txt", "twin.txt"),
        "twin-inside-other-name": (root / "hello.txt", "hello.txt", "hello.txt"),
        "symlink-to-hard-link": (outside / "secret.txt", "via-symlink.txt", "innocent.txt"),
    }


HARD_LINK_CASES = ["to-outside", "in-subdirectory", "twin-inside", "twin-inside-other-name", "symlink-to-hard-link"]


@pytest.mark.parametrize("case", HARD_LINK_CASES)
async def test_reading_a_hard_linked_file_is_refused_naming_path_and_links(
    tool: FileSystemTool, root: Path, outside: Path, case: str
) -> None:
    linked, path, shown = hard_link_cases(root, outside)[case]
    error = await refused(tool, "read", {"path": path})
    assert (error.reason_code, error.argument) == ("path_outside_sandbox", "path")
    assert f"{shown!r} is a hard link with {os.stat(linked).st_nlink} links" in error.reason
    assert "secret" not in error.reason


@pytest.mark.parametrize("case", HARD_LINK_CASES)
async def test_writing_onto_a_hard_linked_file_is_refused_before_any_effect(
    tool: FileSystemTool, root: Path, outside: Path, tmp_path: Path, case: str
) -> None:
    linked, path, _ = hard_link_cases(root, outside)[case]
    before, content = files_under(tmp_path), linked.read_bytes()
    error = await refused(tool, "write", {"path": path, "content": "pwned"})
    assert error.reason_code == "path_outside_sandbox"
    assert "hard link" in error.reason
    assert linked.read_bytes() == content
    assert os.stat(linked).st_ino == os.stat(root / path).st_ino, "the entry was not replaced"
    assert files_under(tmp_path) == before, "nothing created, not even a temporary file"


async def test_a_file_whose_other_names_are_gone_works_again(tool: FileSystemTool, root: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", root / "innocent.txt")
    assert (await refused(tool, "read", {"path": "innocent.txt"})).reason_code == "path_outside_sandbox"
    (outside / "secret.txt").unlink()
    assert (await tool.call("read", {"path": "innocent.txt"}))["content"] == "top secret"
    assert (await tool.call("write", {"path": "innocent.txt", "content": "mine"}))["created"] is False
    assert (await tool.call("read", {"path": "hello.txt"}))["content"] == "héllo\n"


async def test_unknown_operation_is_refused(tool: FileSystemTool) -> None:
    error = await refused(tool, "delete", {"path": "hello.txt"})
    assert error.reason_code == "unknown_operation"
    assert "delete" in error.reason


@pytest.mark.parametrize(
    ("operation", "arguments", "reason_code", "argument"),
    [
        ("read", {"path": 3}, "invalid_argument", "path"),
        ("read", {"path": "hello.txt", "mode": "rb"}, "invalid_argument", "mode"),
        ("read", {"path": "x" * 1025}, "invalid_argument", "path"),
        ("write", {"path": "f.txt"}, "invalid_argument", "content"),
        ("write", {"path": "f.txt", "content": "\ud800"}, "invalid_argument", "content"),
        ("read", {"path": "missing.txt"}, "not_found", "path"),
        ("read", {"path": "docs"}, "not_a_file", "path"),
        ("read", {"path": "."}, "not_a_file", "path"),
        ("list", {"path": "hello.txt"}, "not_a_directory", "path"),
        ("write", {"path": "docs", "content": "x"}, "not_a_file", "path"),
        ("write", {"path": "hello.txt/inner", "content": "x"}, "not_a_directory", "path"),
    ],
)
async def test_bad_arguments_are_refused_naming_the_argument(
    tool: FileSystemTool, operation: str, arguments: dict[str, Any], reason_code: str, argument: str
) -> None:
    error = await refused(tool, operation, arguments)
    assert (error.reason_code, error.argument) == (reason_code, argument)


async def test_files_over_the_limit_are_refused(root: Path) -> None:
    tool = FileSystemTool(root, max_read_bytes=8)
    (root / "big.txt").write_bytes(b"x" * 9)
    assert (await refused(tool, "read", {"path": "big.txt"})).reason_code == "too_large"
    assert (await tool.call("read", {"path": "hello.txt"}))["size_bytes"] == 7
    error = await refused(tool, "write", {"path": "w.txt", "content": "y" * 9})
    assert (error.reason_code, error.argument) == ("too_large", "content")
    assert not (root / "w.txt").exists()


async def test_non_utf8_file_is_refused(tool: FileSystemTool, root: Path) -> None:
    (root / "bin.dat").write_bytes(b"\xff\xfe\x00")
    assert (await refused(tool, "read", {"path": "bin.dat"})).reason_code == "not_utf8"


async def test_a_fifo_is_refused_without_blocking(tool: FileSystemTool, root: Path) -> None:
    os.mkfifo(root / "pipe")
    assert (await refused(tool, "read", {"path": "pipe"})).reason_code == "not_a_file"
    listed = await tool.call("list", {})
    assert {"name": "pipe", "kind": "other", "size_bytes": 0} in listed["entries"]


def test_errors_carry_structured_fields() -> None:
    error = ToolRefused("path_outside_sandbox", "'path' '../x' escapes", argument="path")
    assert isinstance(error, ExecutorError)
    assert str(error) == "path_outside_sandbox: 'path' '../x' escapes"
    assert not error.transient


# --- descriptor --------------------------------------------------------------------------------


def load_descriptor() -> ToolDescriptor:
    return msgspec.json.decode(DESCRIPTOR_PATH.read_bytes(), type=ToolDescriptor)


def test_descriptor_decodes_with_the_declared_classes() -> None:
    descriptor = load_descriptor()
    assert (descriptor.name, descriptor.version, descriptor.adapter) == (
        "file_system",
        "1.1.0",
        "file_system",
    )
    assert descriptor.timeout_s == 10
    assert (descriptor.rate_limit.calls, descriptor.rate_limit.period_s) == (5, 60)
    classes = {name: (op.side_effect_class, op.risk_tier) for name, op in descriptor.operations.items()}
    assert classes == {
        "read": (SideEffectClass.READ_ONLY, RiskTier.TRIVIAL),
        "list": (SideEffectClass.READ_ONLY, RiskTier.TRIVIAL),
        "write": (SideEffectClass.REVERSIBLE_WRITE, RiskTier.MEDIUM),
    }


@pytest.mark.parametrize(
    ("operation", "arguments"),
    [
        ("read", {"path": "hello.txt"}),
        ("list", {}),
        ("list", {"path": "docs"}),
        ("write", {"path": "out/w.txt", "content": "written"}),
    ],
)
async def test_descriptor_schemas_accept_real_calls(
    tool: FileSystemTool, operation: str, arguments: dict[str, Any]
) -> None:
    spec = load_descriptor().operations[operation]
    assert jsonschema_rs.validator_for(spec.input_schema).is_valid(arguments)
    result = await tool.call(operation, arguments)
    assert jsonschema_rs.validator_for(spec.output_schema).is_valid(result)


@pytest.mark.parametrize(
    ("operation", "value"),
    [
        ("read", {"path": ""}),
        ("read", {"path": "x" * 1025}),
        ("read", {"path": "a", "extra": 1}),
        ("read", {}),
        ("write", {"path": "a"}),
        ("write", {"path": "a", "content": "x" * 1_048_577}),
        ("list", {"path": 1}),
    ],
)
def test_descriptor_input_schemas_reject_bad_arguments(operation: str, value: dict[str, Any]) -> None:
    spec = load_descriptor().operations[operation]
    assert not jsonschema_rs.validator_for(spec.input_schema).is_valid(value)


@pytest.mark.parametrize(
    ("operation", "value"),
    [
        ("read", {"path": "a", "content": "x", "size_bytes": 1}),
        ("read", {"path": "a", "content": "x", "size_bytes": 1, "sha256": "0" * 64, "extra": 1}),
        ("list", {"path": ".", "entries": [{"name": "a", "kind": "device", "size_bytes": 0}]}),
        ("write", {"path": "a", "size_bytes": 1, "sha256": "nothex", "created": True}),
    ],
)
def test_descriptor_output_schemas_reject_other_shapes(operation: str, value: dict[str, Any]) -> None:
    spec = load_descriptor().operations[operation]
    assert not jsonschema_rs.validator_for(spec.output_schema).is_valid(value)


@pytest.mark.parametrize(
    "path",
    ["n1/n2/n3/" + "é" * 130, "n4/n5/" + "x" * 300, "n6/" + "d" * 256 + "/f.txt", "n7/" + "é" * 128 + ".txt"],
    ids=["multibyte-name", "long-name", "long-directory", "multibyte-just-over"],
)
async def test_a_write_refused_for_a_long_name_leaves_nothing_behind(tool: Any, root: Path, path: str) -> None:
    before = _tree(root)
    error = await refused(tool, "write", {"path": path, "content": "x"})
    assert (error.reason_code, error.argument) == ("invalid_argument", "path") and "255 bytes" in error.reason
    assert _tree(root) == before, "a refused write created directories"


def _tree(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*"))


async def test_a_name_of_exactly_255_bytes_is_written(tool: Any, root: Path) -> None:
    name = "é" * 127 + "x"
    assert len(name.encode()) == 255
    await tool.call("write", {"path": f"deep/{name}", "content": "ok"})
    assert (root / "deep" / name).read_text() == "ok"


async def test_no_write_takes_effect_once_the_lease_lapsed(root: Path) -> None:
    (root / "kept.txt").write_text("before")
    lapsed = FileSystemTool(root, may_write=lambda: False)
    for path in ("kept.txt", "new.txt"):
        with pytest.raises(ToolFailed) as caught:
            await lapsed.call("write", {"path": path, "content": "after"})
        assert caught.value.reason_code == "lease_lost"
    assert (root / "kept.txt").read_text() == "before" and not (root / "new.txt").exists()
    assert not [p for p in _tree(root) if p.name.startswith(".effectgate-")], "a temporary file was left behind"


@pytest.mark.parametrize(
    ("size_bytes", "threaded"), [(7, False), (INLINE_READ_BYTES, False), (INLINE_READ_BYTES + 1, True)]
)
async def test_a_small_file_is_read_on_the_loop_a_larger_one_in_a_thread_with_the_same_answer(
    tool: FileSystemTool, root: Path, monkeypatch: pytest.MonkeyPatch, size_bytes: int, threaded: bool
) -> None:
    handed: list[object] = []

    async def to_thread(work: Any, *args: Any) -> Any:
        handed.append(work)
        return work(*args)

    monkeypatch.setattr("effectgate.executor.adapters.file_system.asyncio.to_thread", to_thread)
    data = b"y" * size_bytes
    (root / "sized.txt").write_bytes(data)
    found = await tool.call("read", {"path": "sized.txt"})
    assert (found["size_bytes"], found["sha256"]) == (size_bytes, hashlib.sha256(data).hexdigest())
    assert bool(handed) is threaded


async def test_a_large_file_read_in_the_thread_is_checked_again_from_the_start(
    tool: FileSystemTool, root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "big.txt").write_bytes(b"z" * (INLINE_READ_BYTES + 1))
    real = asyncio.to_thread

    async def swap_then_thread(work: Any, *args: Any) -> Any:  # the entry becomes an escaping symlink meanwhile
        (root / "big.txt").unlink()
        os.symlink(outside / "secret.txt", root / "big.txt")
        return await real(work, *args)

    monkeypatch.setattr("effectgate.executor.adapters.file_system.asyncio.to_thread", swap_then_thread)
    assert (await refused(tool, "read", {"path": "big.txt"})).reason_code == "path_outside_sandbox"
