"""The CLI finds its files as ``effectgate up`` gives them to the services, from any working directory.

Every command runs as a process from a working directory that is not the repository's and
holds a decoy ``deploy/policy`` (a command reading relative to where it runs would use it,
silently): ``policy check``, ``simulate`` and ``explain`` read the principal directory and
attributes ``up`` gives the policy service and say which; ``explain`` says when those differ
from the ones the deciding replica used; ``budgets check`` reads no local file; ``tools
publish`` names every mistake of a descriptor with the key meant, and its success line once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from effectgate.cli.stack.system import Stack

pytestmark = pytest.mark.e2e

DECOY_DIRECTORY = '[principals.decoy]\nautonomy = 3\nroles = ["agent"]\n'


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory with a decoy ``deploy/policy`` that no command may read."""
    work = tmp_path_factory.mktemp("elsewhere")
    (work / "deploy" / "policy").mkdir(parents=True)
    (work / "deploy" / "policy" / "principals.toml").write_text(DECOY_DIRECTORY)
    (work / "deploy" / "policy" / "attributes.toml").write_text("not = [toml")
    return work


def effectgate(stack: Stack, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``effectgate ARGS`` as the stack's operator, run in ``cwd`` with no ``EFFECTGATE_*`` setting but ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EFFECTGATE_")}
    clean |= {"NATS_URL": stack.nats_url, "EFFECTGATE_STATE_DIR": str(stack.state_dir), "COLUMNS": "400", **env}
    command = [sys.executable, "-m", "effectgate.cli", *args]
    return subprocess.run(command, env=clean, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def words(text: str) -> str:
    return " ".join(text.split())


def test_policy_check_reads_the_files_up_gives_the_policy_service_and_says_which(
    stack: Stack, elsewhere: Path, repo_root: Path, e2e_paths: Any
) -> None:
    policy = str(repo_root / "deploy/policy/policy.cedar")

    default = effectgate(stack, elsewhere, "policy", "check", policy)
    named = effectgate(
        stack, elsewhere, "policy", "check", policy, EFFECTGATE_POLICY_PRINCIPALS_FILE=str(e2e_paths.principals)
    )

    assert default.returncode == 0 and "valid" in default.stdout, default.stdout + default.stderr
    shipped = repo_root / "deploy/policy"
    assert (
        f"read: principal directory {shipped / 'principals.toml'}, attributes {shipped / 'attributes.toml'}"
        in words(default.stdout)
    )
    assert named.returncode == 0 and f"principal directory {e2e_paths.principals}," in words(named.stdout)
    assert str(elsewhere) not in default.stdout + named.stdout


def test_policy_simulate_reads_the_same_files_and_says_which_beside_its_json(
    stack: Stack, elsewhere: Path, repo_root: Path
) -> None:
    policy = str(repo_root / "deploy/policy/policy.cedar")

    done = effectgate(stack, elsewhere, "policy", "simulate", policy, "--since", "1h", "--json")

    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)
    assert f"read: principal directory {repo_root / 'deploy/policy/principals.toml'}," in words(done.stderr)


async def test_policy_explain_says_whether_its_files_are_the_deciding_replicas(
    gate: Any, stack: Stack, elsewhere: Path, repo_root: Path, e2e_paths: Any
) -> None:
    receipt = await gate.call(gate.agent(), "read", {"path": "hello.txt"})
    assert receipt.outcome == "succeeded", receipt
    await gate.settle()

    same = effectgate(
        stack,
        elsewhere,
        "policy",
        "explain",
        receipt.request_id,
        EFFECTGATE_POLICY_PRINCIPALS_FILE=str(e2e_paths.principals),
    )
    other = effectgate(stack, elsewhere, "policy", "explain", receipt.request_id)

    assert same.returncode == 0 and other.returncode == 0, same.stderr + other.stderr
    assert f"read: principal directory {e2e_paths.principals}," in words(same.stdout)
    assert "the deciding replica decided over the same principal directory and attributes" in words(same.stdout)
    assert "warning" not in same.stdout
    said = words(other.stdout)
    assert f"read: principal directory {repo_root / 'deploy/policy/principals.toml'}," in said
    assert "warning: these differ from the principal directory and attributes the deciding replica used" in said


def test_budgets_check_reads_no_local_file(stack: Stack, elsewhere: Path) -> None:
    done = effectgate(stack, elsewhere, "budgets", "check", "--settle-s", "0.5", "--json")

    assert done.returncode in (0, 1), done.stderr
    assert set(json.loads(done.stdout)) == {"counters", "differences", "pending"}


def test_tools_publish_names_every_mistake_with_the_key_meant_and_its_success_once(
    stack: Stack, elsewhere: Path, repo_root: Path
) -> None:
    shipped = json.loads((repo_root / "deploy/tools/file_system.json").read_text())
    good = {**shipped, "name": "published_elsewhere", "version": "1.0.0"}
    read = dict(good["operations"]["read"])
    read["side_efect_class"] = read.pop("side_effect_class")
    mistaken = {
        **good,
        "timeout": 5,
        "rate_limit": {"calls": 1, "period": 60},
        "operations": {**good["operations"], "read": read},
    }
    (elsewhere / "good.json").write_text(json.dumps(good))
    (elsewhere / "mistaken.json").write_text(json.dumps(mistaken))

    refused = effectgate(stack, elsewhere, "tools", "publish", "mistaken.json")
    published = effectgate(stack, elsewhere, "tools", "publish", "good.json")
    again = effectgate(stack, elsewhere, "tools", "publish", "good.json")

    said = words(refused.stderr)
    assert refused.returncode == 1 and said.startswith("malformed: not a tool descriptor: 3 mistakes:"), said
    assert 'timeout: unknown field; did you mean "timeout_s"?' in said
    assert 'rate_limit.period: unknown field; did you mean "period_s"?' in said
    assert 'operations.read.side_efect_class: unknown field; did you mean "side_effect_class"?' in said
    assert published.returncode == 0 and published.stdout.strip() == "published_elsewhere@1.0.0 published"
    assert again.returncode == 0 and again.stdout.strip() == "published_elsewhere@1.0.0 unchanged"
