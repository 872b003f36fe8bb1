"""``effectgate demo`` runs secured end to end: the real command, as a person starts it first."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

EFFECTGATE = str(Path(sys.executable).parent / "effectgate")


def test_the_demo_runs_every_step_on_a_secured_stack(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL") and not k.startswith("EFFECTGATE_")
    }
    done = subprocess.run(
        [EFFECTGATE, "demo"], cwd=tmp_path, env={**env, "COLUMNS": "400"}, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "demo finished" in done.stdout and "INSECURE" not in done.stdout
    state = Path(re.search(r"workspace (\S+)", done.stdout)[1]) / "state"  # type: ignore[index]
    assert f"EFFECTGATE_STATE_DIR={state}" in done.stdout, "the approver's command names the demo's credentials"
    files = {path.stem for path in (state / "credentials").iterdir()}
    assert {"agent-demo-agent", "approver-alice", "operator"} <= files
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in (state / "credentials").iterdir())
    config = (state / "nats-auth.conf").read_text()
    assert '"agent-demo-agent"' in config and '"admin"' not in config
    logs = "".join(path.read_text() for path in (state / "logs").glob("*.log"))
    assert "INSECURE" not in logs


@pytest.mark.matrix
def test_the_chat_demo_approves_a_write_from_a_matrix_room(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL") and not k.startswith("EFFECTGATE_")
    }
    done = subprocess.run(
        [EFFECTGATE, "demo", "--chat", "matrix"],
        cwd=tmp_path,
        env={**env, "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    transcript = done.stdout.split("The approvals room, as alice sees it", 1)[1]
    rows = [line for line in transcript.splitlines() if "│" in line]
    kinds = [row.split("│")[2].strip() for row in rows]
    shown = [k for k in kinds if k]
    assert shown[:2] == ["card", "reaction"]  # the card first; then the edit, the answer and the outcome, in any order
    assert sorted(shown[2:]) == ["card edited", "in the card's thread", "in the card's thread"]
    assert "approved by alice" in transcript and ": succeeded (ok)" in transcript
    assert "demo finished" in done.stdout
