"""A stack whose policy service holds no usable policy is not reported up: the reason is printed instead.

Each test starts its own servers and services (no shared stack): one through
``effectgate up`` as a user runs it, one through :func:`effectgate.cli.stack.launch.running_stack`
as the end-to-end fixtures do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from effectgate.cli.stack.launch import running_stack
from effectgate.cli.stack.readiness import PolicyNotReady

pytestmark = pytest.mark.e2e

NEVER_MATCHES = (
    '\n@id("payments-team-writes")\n'
    'permit (principal is Agent, action == Action::"execute", resource is Tool)\n'
    'when { principal has department && principal.department == "payments" };\n'
)


def _deploy_copy(repo_root: Path, target: Path, policy_text: str) -> Path:
    shutil.copytree(repo_root / "deploy", target)
    (target / "policy" / "policy.cedar").write_text(policy_text)
    return target


def test_up_refuses_a_policy_that_can_never_match_and_prints_why(tmp_path: Path, repo_root: Path) -> None:
    shipped = (repo_root / "deploy/policy/policy.cedar").read_text()
    deploy = _deploy_copy(repo_root, tmp_path / "deploy", shipped + NEVER_MATCHES)
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL")}
    env.update({"EFFECTGATE_DEPLOY_DIR": str(deploy), "COLUMNS": "400"})
    command = [sys.executable, "-m", "effectgate.cli", "up", "--state-dir", str(tmp_path / "state")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "effectgate is up" not in done.stdout
    printed = " ".join((done.stdout + done.stderr).split())
    assert "the policy service is not ready" in printed, printed
    assert "'payments-team-writes'" in printed and "principal.department" in printed, printed


def test_an_empty_policy_keeps_the_stack_from_starting(
    tmp_path: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty.cedar"
    empty.write_text("// every permit was removed\n")
    monkeypatch.delenv("NATS_URL", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    env = {"EFFECTGATE_POLICY_POLICY_FILE": str(empty)}
    with pytest.raises(PolicyNotReady, match=r"holds no policy: every request will be denied"):
        auth = "open" if os.environ.get("EFFECTGATE_E2E_AUTH") == "open" else "secured"  # as tests/e2e/conftest.py
        with running_stack(tmp_path / "state", env, auth=auth):
            pass
    log = (tmp_path / "state" / "logs" / "policy.log").read_text()
    assert "NOT READY" in log and "every request will be denied" in log
