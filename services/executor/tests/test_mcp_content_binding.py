"""``git_add`` of the real ``mcp-server-git``: the files it names are bound, and checked right before it is sent."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.file_references import FILE_MARKER
from effectgate.executor.adapters.contents import ContentReader
from effectgate.executor.adapters.mcp.client import McpToolHost
from effectgate.executor.effects.binding import ContentGuard
from effectgate.executor.errors import ToolRefused
from effectgate.registry.adapters.mcp_import import import_mcp_server
from effectgate.shared.mcp.loading import resolve_command
from effectgate.shared.mcp.servers import McpServerConfig, Override


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("repo")
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for key, value in (("user.name", "Tester"), ("user.email", "t@example.invalid"), ("commit.gpgsign", "false")):
        _git(path, "config", key, value)
    (path / "base.txt").write_text("base\n")
    _git(path, "add", "base.txt")
    _git(path, "commit", "-q", "-m", "base")
    return path


@pytest.fixture(scope="module")
def config(repo: Path) -> McpServerConfig:
    return McpServerConfig(
        name="git",
        command=resolve_command("mcp-server-git"),
        args=["--repository", str(repo)],
        pinned_arguments={"repo_path": str(repo)},
        overrides={"git_add": Override(file_arguments=("files",))},
        file_root=str(repo),
    )


@pytest.fixture(scope="module")
async def host(config: McpServerConfig) -> AsyncIterator[McpToolHost]:
    tool_host = McpToolHost({"git": config})
    yield tool_host
    await tool_host.aclose()


@pytest.fixture(scope="module")
async def registered(config: McpServerConfig) -> ToolDescriptor:
    return await import_mcp_server(config)


def _staged(repo: Path) -> list[str]:
    return _git(repo, "diff", "--cached", "--name-only").split()


def test_the_registry_marks_the_declared_file_arguments(registered: ToolDescriptor) -> None:
    schema = registered.operations["git_add"].input_schema

    assert schema["properties"]["files"][FILE_MARKER] is True
    assert FILE_MARKER not in schema["properties"]["repo_path"]


async def test_a_git_add_of_a_file_rewritten_after_its_approval_stages_nothing(
    host: McpToolHost, registered: ToolDescriptor, repo: Path
) -> None:
    (repo / "notes.txt").write_text("approved\n")
    (repo / "other.txt").write_text("other\n")
    arguments = {"files": ["other.txt", "notes.txt"], "repo_path": str(repo)}
    reader = ContentReader({"mcp:git": repo})
    guard = ContentGuard(reader, registered, "git_add", arguments, reader.read(registered, "git_add", arguments))
    (repo / "notes.txt").write_text("rewritten after the approval\n")
    expected = registered.operations["git_add"]

    with pytest.raises(ToolRefused) as refused:
        await host.call("git", "git_add", arguments, 30.0, expected, guard)

    assert refused.value.reason_code == "content_changed" and "'notes.txt' changed" in refused.value.reason
    assert _staged(repo) == []


async def test_a_git_add_of_unchanged_files_stages_what_was_approved(
    host: McpToolHost, registered: ToolDescriptor, repo: Path
) -> None:
    (repo / "kept.txt").write_text("approved and kept\n")
    arguments = {"files": ["kept.txt"], "repo_path": str(repo)}
    reader = ContentReader({"mcp:git": repo})
    guard = ContentGuard(reader, registered, "git_add", arguments, reader.read(registered, "git_add", arguments))

    await host.call("git", "git_add", arguments, 30.0, registered.operations["git_add"], guard)

    assert "kept.txt" in _staged(repo)
    assert _git(repo, "show", ":kept.txt") == "approved and kept\n"
    _git(repo, "reset", "-q")
