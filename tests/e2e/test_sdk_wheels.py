"""The SDK installed elsewhere as the README says, and the README's first agent run on it.

``./dev sdk-wheels`` builds the wheels into a folder, a fresh virtualenv (``python3 -m venv``)
gets ``pip install effectgate-sdk --find-links <folder>`` (third-party packages from the
index pip is configured with), and the README's first-agent snippet (the python block after
its marker comment) runs on that environment's Python against this module's stack, as
``demo-agent`` of the shipped principal directory: it lists, reads, and waits for its write
until alice approves it.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from effectgate.cli.stack.launch import credentials_dir

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- first-agent snippet: tests/e2e/test_sdk_wheels.py runs it against a stack -->"
AGENT = "demo-agent"


def readme_snippet() -> str:
    """The python code block right after :data:`MARKER` in README.md."""
    _, marked, after = (ROOT / "README.md").read_text().partition(MARKER)
    found = re.match(r"\s*```python\n(.*?)\n```", after, re.DOTALL)
    assert marked and found, "README.md has no python block right after the first-agent marker"
    return found[1]


def _env(**extra: str) -> dict[str, str]:
    """This environment without the test run's virtualenv, bus or effectgate settings, plus ``extra``."""
    dropped = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "NATS_URL", "REDIS_URL", "AGENT_CREDENTIALS")
    kept = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("EFFECTGATE_")}
    return {**kept, **extra}


def _run(*command: str | Path, cwd: Path) -> str:
    done = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def stack_env(repo_root: Path) -> dict[str, str]:
    """The shipped principal directory: the README's ``demo-agent``, and ``alice`` who approves its write."""
    principals = str(repo_root / "deploy/policy/principals.toml")
    return {"EFFECTGATE_POLICY_PRINCIPALS_FILE": principals, "EFFECTGATE_APPROVALS_PRINCIPALS_FILE": principals}


@pytest.fixture(scope="module")
def agent_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Python of a fresh virtualenv holding the SDK installed from ``./dev sdk-wheels``'s folder."""
    base = tmp_path_factory.mktemp("sdk-wheels")
    wheels, venv = base / "wheels", base / "venv"
    _run(ROOT / "dev", "sdk-wheels", wheels, cwd=base)
    built = sorted(path.name.split("-")[0] for path in wheels.glob("*.whl"))
    assert built == ["effectgate_contracts", "effectgate_sdk"], "the SDK and the one workspace package it needs"
    _run("python3", "-m", "venv", venv, cwd=base)
    _run(venv / "bin" / "pip", "install", "effectgate-sdk", "--find-links", wheels, cwd=base)
    return venv / "bin" / "python"


async def _approval_of(gate: Any, agent: asyncio.subprocess.Process, timeout_s: float = 90.0) -> dict[str, Any]:
    """The pending approval the agent's write opened (while the agent still runs)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [item for item in await gate.approvals() if item["principal"] == AGENT]
        if found:
            return dict(found[0])
        assert agent.returncode is None, f"the agent ended before its write awaited approval: {agent.returncode}"
        await asyncio.sleep(0.2)
    raise TimeoutError(f"no approval opened by {AGENT} in {timeout_s:g} s")


async def test_the_readmes_agent_gets_its_receipts_from_the_sdk_installed_from_wheels(
    gate: Any, agent_python: Path, tmp_path: Path
) -> None:
    if not gate.stack.credentials:
        pytest.skip("the README's agent connects with its own credentials file: a secured stack only")
    where = _run(agent_python, "-c", "import effectgate.sdk; print(effectgate.sdk.__file__)", cwd=tmp_path)
    assert Path(where.strip()).is_relative_to(agent_python.parent.parent), "the wheel's SDK, not the checkout's"
    (tmp_path / "agent.py").write_text(readme_snippet())
    credentials = credentials_dir(gate.paths.state) / f"agent-{AGENT}.json"
    env = _env(NATS_URL=gate.stack.nats_url, AGENT_CREDENTIALS=str(credentials))
    env["EFFECTGATE_PUBLIC_KEYS_DIR"] = str(gate.stack.public_keys)
    agent = await asyncio.create_subprocess_exec(
        str(agent_python), "agent.py", cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert (await gate.decide("alice", (await _approval_of(gate, agent))["approval_id"]))["ok"]
        out, err = await asyncio.wait_for(agent.communicate(), 120)
    finally:
        if agent.returncode is None:
            agent.kill()
            await agent.wait()
    printed, output = out.decode().splitlines(), f"{out.decode()}\n{err.decode()}"
    assert agent.returncode == 0 and len(printed) == 3, output
    assert "file_system" in printed[0], output
    assert printed[1].startswith("succeeded ") and printed[2].startswith("succeeded "), output
    assert (gate.paths.sandbox / "hello.txt").read_text() == "hi", "the approved write ran"
