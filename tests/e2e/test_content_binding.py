"""An approval binds what its file references named when it opened, not only the paths (guarantee 4).

The stack runs the built-in ``file_system`` tool and two real ``mcp-server-git`` servers, each
pinned to a repository: ``git`` declares ``git_add``'s ``files`` as file references under its
``file_root``; ``blind`` declares them too but has no ``file_root``, so the gateway cannot see
its files and its approvals bind the references only (and say so). Between the approval
opening (when the approver sees the card) and the grant, a test rewrites, creates or deletes
a file: the grant ends ``refused`` ``content_changed`` naming the path, and nothing runs.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from effectgate.cli.render.approvals import approvals_blocks
from effectgate.contracts.bus.catalog import Rpc

from .support import DirWatch, Gate, Paths

pytestmark = pytest.mark.e2e

IN_MOVED_TO = 0x80
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x.invalid"}
GIT_ENV |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x.invalid"}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=GIT_ENV)
    return done.stdout


def _repo(path: Path) -> Path:
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("repo\n")
    _git(path, "add", "README")
    _git(path, "commit", "-q", "-m", "start")
    return path


def _server(name: str, repo: Path, file_root: bool) -> str:
    root = f'file_root = "{repo}"\n' if file_root else ""
    return (
        f'[servers.{name}]\ncommand = "mcp-server-git"\nargs = ["--repository", "{repo}"]\n'
        f'pinned_arguments = {{ repo_path = "{repo}" }}\n{root}'
        'default_side_effect_class = "REVERSIBLE_WRITE"\ndefault_risk_tier = "medium"\n'
        f'[servers.{name}.overrides.git_add]\nfile_arguments = ["files"]\n'
    )


@pytest.fixture(scope="module")
def repos(e2e_paths: Paths) -> dict[str, Path]:
    base = Path(e2e_paths.state).parent
    return {"git": _repo(base / "repo"), "blind": _repo(base / "blind-repo")}


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Paths, repos: dict[str, Path]) -> dict[str, str]:
    servers = Path(e2e_paths.state).parent / "servers.toml"
    servers.write_text(_server("git", repos["git"], file_root=True) + _server("blind", repos["blind"], file_root=False))
    return {"EFFECTGATE_MCP_SERVERS_FILE": str(servers)}


async def _listed(gate: Gate, tool: str) -> None:
    """Wait until the registry holds ``tool`` (an MCP server's listing is imported as the stack starts)."""
    deadline = time.monotonic() + 60
    while not (await gate.rpc(Rpc.REGISTRY_GET, {"tool": tool}))["ok"]:
        assert time.monotonic() < deadline, f"{tool} was never listed"
        await asyncio.sleep(0.5)


async def _opened(gate: Gate, agent: str, tool: str, operation: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Submit a call as ``agent`` and return its pending approval as listed (the card's content)."""
    await _listed(gate, tool)
    client = await gate.client(agent)
    return await gate.pending(await client.submit(tool, operation, arguments), timeout_s=30)


async def _granted(gate: Gate, agent: str, approval: dict[str, Any]) -> Any:
    reply = await gate.decide("alice", approval["approval_id"])
    assert reply["ok"], reply
    return await gate.receipt(agent, approval["request_id"], timeout_s=30)


def _refused_naming(issued: Any, path: str) -> None:
    assert (issued.outcome, issued.reason_code) == ("refused", "content_changed"), issued.reason
    assert f"'{path}'" in issued.reason and issued.reason.endswith("nothing ran"), issued.reason
    assert issued.result is None


def _kinds(approval: dict[str, Any]) -> list[tuple[str, str]]:
    return [(state["path"], state["kind"]) for state in approval["contents"]]


def _card(approval: dict[str, Any]) -> str:
    out = StringIO()
    Console(file=out, width=200, color_system=None).print(approvals_blocks([approval]))
    return out.getvalue()


# --- file_system: a write's existing target, a single path ------------------------------------------------


async def test_an_overwrite_of_a_file_rewritten_before_the_grant_is_refused_and_writes_nothing(
    gate: Gate, new_id: Any, watch: DirWatch
) -> None:
    agent, name = gate.agent(), new_id("over-") + ".txt"
    target = gate.paths.sandbox / name
    target.write_text("what the approver saw\n")
    watch.watch(gate.paths.sandbox)
    approval = await _opened(gate, agent, "file_system", "write", {"path": name, "content": "approved"})
    assert _kinds(approval) == [(name, "file")] and approval["contents"][0]["size_bytes"] == 22
    assert "— bound" in _card(approval)

    target.write_text("rewritten after the card was shown\n")
    issued = await _granted(gate, agent, approval)

    _refused_naming(issued, name)
    assert target.read_text() == "rewritten after the card was shown\n"
    assert watch.count(name, IN_MOVED_TO) == 0  # never replaced
    assert not [entry for entry in os.listdir(gate.paths.sandbox) if entry.startswith(".effectgate-")]


async def test_an_overwrite_of_unchanged_content_runs_once(gate: Gate, new_id: Any, watch: DirWatch) -> None:
    agent, name = gate.agent(), new_id("same-") + ".txt"
    (gate.paths.sandbox / name).write_text("unchanged\n")
    watch.watch(gate.paths.sandbox)
    approval = await _opened(gate, agent, "file_system", "write", {"path": name, "content": "approved"})

    issued = await _granted(gate, agent, approval)

    assert (issued.outcome, issued.reason_code) == ("succeeded", "ok"), issued.reason
    assert (gate.paths.sandbox / name).read_text() == "approved"
    assert watch.count(name, IN_MOVED_TO) == 1


async def test_a_write_to_a_missing_file_that_appears_before_the_grant_is_refused(gate: Gate, new_id: Any) -> None:
    agent, name = gate.agent(), new_id("new-") + ".txt"
    approval = await _opened(gate, agent, "file_system", "write", {"path": name, "content": "approved"})
    assert _kinds(approval) == [(name, "absent")]

    (gate.paths.sandbox / name).write_text("planted\n")
    issued = await _granted(gate, agent, approval)

    _refused_naming(issued, name)
    assert "did not exist" in issued.reason and (gate.paths.sandbox / name).read_text() == "planted\n"


async def test_an_overwrite_of_a_file_deleted_before_the_grant_is_refused(gate: Gate, new_id: Any) -> None:
    agent, name = gate.agent(), new_id("gone-") + ".txt"
    (gate.paths.sandbox / name).write_text("there when approved\n")
    approval = await _opened(gate, agent, "file_system", "write", {"path": name, "content": "approved"})

    (gate.paths.sandbox / name).unlink()
    issued = await _granted(gate, agent, approval)

    _refused_naming(issued, name)
    assert "is gone" in issued.reason and not (gate.paths.sandbox / name).exists()


# --- mcp-server-git: a list of files under the pinned repository ---------------------------------------


async def test_a_git_add_of_a_file_rewritten_before_the_grant_stages_nothing(
    gate: Gate, new_id: Any, repos: dict[str, Path]
) -> None:
    repo, agent = repos["git"], gate.agent()
    first, second = new_id("a-") + ".txt", new_id("b-") + ".txt"
    (repo / first).write_text("first, approved\n")
    (repo / second).write_text("second, approved\n")
    approval = await _opened(gate, agent, "mcp_git", "git_add", {"repo_path": str(repo), "files": [first, second]})
    assert _kinds(approval) == [(first, "file"), (second, "file")]

    (repo / second).write_text("second, rewritten before the grant\n")
    issued = await _granted(gate, agent, approval)

    _refused_naming(issued, second)
    assert _git(repo, "diff", "--cached", "--name-only") == ""


async def test_a_git_add_of_unchanged_files_stages_exactly_what_was_approved(
    gate: Gate, new_id: Any, repos: dict[str, Path]
) -> None:
    repo, agent, name = repos["git"], gate.agent(), new_id("kept-") + ".txt"
    (repo / name).write_text("approved content\n")
    approval = await _opened(gate, agent, "mcp_git", "git_add", {"repo_path": str(repo), "files": [name]})

    issued = await _granted(gate, agent, approval)

    assert (issued.outcome, issued.reason_code) == ("succeeded", "ok"), issued.reason
    assert _git(repo, "show", f":{name}") == "approved content\n"
    _git(repo, "reset", "-q")


async def test_a_git_add_of_a_file_deleted_before_the_grant_stages_nothing(
    gate: Gate, new_id: Any, repos: dict[str, Path]
) -> None:
    repo, agent, name = repos["git"], gate.agent(), new_id("del-") + ".txt"
    (repo / name).write_text("approved\n")
    approval = await _opened(gate, agent, "mcp_git", "git_add", {"repo_path": str(repo), "files": [name, "README"]})

    (repo / name).unlink()
    issued = await _granted(gate, agent, approval)

    _refused_naming(issued, name)
    assert _git(repo, "diff", "--cached", "--name-only") == ""


async def test_a_server_whose_files_the_gateway_cannot_see_binds_the_references_only_and_says_so(
    gate: Gate, new_id: Any, repos: dict[str, Path]
) -> None:
    repo, agent, name = repos["blind"], gate.agent(), new_id("blind-") + ".txt"
    (repo / name).write_text("approved\n")
    approval = await _opened(gate, agent, "mcp_blind", "git_add", {"repo_path": str(repo), "files": [name]})
    assert _kinds(approval) == [(name, "unseen")]
    assert f"'{name}': the executor cannot see the files of mcp:blind — binds the reference only" in _card(approval)

    (repo / name).write_text("rewritten: this approval bound only the path\n")
    issued = await _granted(gate, agent, approval)

    assert (issued.outcome, issued.reason_code) == ("succeeded", "ok"), issued.reason
    assert _git(repo, "show", f":{name}") == "rewritten: this approval bound only the path\n"
    _git(repo, "reset", "-q")


# --- fail closed: no reading of the files, no approval ----------------------------------------------------


async def test_no_approval_opens_while_the_executor_cannot_read_the_files(gate: Gate, new_id: Any) -> None:
    agent, name = gate.agent(), new_id("wait-") + ".txt"
    gate.stack.stop("executor")
    try:
        request_id = await gate.submit(agent, "write", {"path": name, "content": "approved"})
        await asyncio.sleep(8)
        assert not await gate.is_pending(request_id), "an approval opened without the executor's reading of its files"
        assert all(item["request_id"] != request_id for item in await gate.approvals())
    finally:
        gate.stack.start("executor")
    approval = await gate.pending(request_id, timeout_s=60)
    assert _kinds(approval) == [(name, "absent")]
