"""``effectgate up`` with an MCP server slower to start than its deadline: it says what it waits for, then runs on.

The real ``effectgate up`` process, ``EFFECTGATE_UP_READY_TIMEOUT_S`` set to a few seconds, and an
MCP server listed at once by the registry but taking 42 s to start in the executor
(``tests/fixtures/mcp/slow_server.py``). ``up`` says which server it is waiting for, is up
with the server listed as ``starting`` (calls to it refused ``tool_unavailable``, nothing
sent), prints when it becomes ready, and serves its calls from then on; SIGTERM stops it all
and no service logs a traceback.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from effectgate.devstack.timing import scaled
from effectgate.sdk import ToolClient

pytestmark = [pytest.mark.e2e, pytest.mark.timing, pytest.mark.timeout(300)]

EFFECTGATE = str(Path(sys.executable).parent / "effectgate")
SLOW = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "slow_server.py"
READY_TIMEOUT_S = 25
START_S = 42
START_TIMEOUT_S = 150
"""The executor's own limit for one start (``EFFECTGATE_EXECUTOR_MCP_START_TIMEOUT_S``): the slow one is not cut."""


def _text(output: Path) -> str:
    return " ".join(output.read_text(errors="replace").split())


def _wait_for(process: subprocess.Popen[bytes], output: Path, pattern: str, timeout_s: float) -> re.Match[str]:
    deadline = time.monotonic() + timeout_s
    while not (found := re.search(pattern, _text(output))):
        assert process.poll() is None, f"effectgate up exited waiting for {pattern!r}: {_text(output)}"
        assert time.monotonic() < deadline, f"no {pattern!r} after {timeout_s}s: {_text(output)}"
        time.sleep(0.2)
    return found


async def _greet(state: Path, url: str) -> tuple[str, str, str]:
    credentials, keys = state / "credentials" / "agent-demo-agent.json", state / "keys" / "public"
    async with await ToolClient.connect(url, "demo-agent", credentials=credentials, public_keys=keys) as agent:
        receipt = await agent.invoke("mcp_slow", "greet", {"name": "x"}, timeout_s=60)
    return receipt.outcome.value, receipt.reason_code, receipt.reason


def test_a_server_still_starting_is_listed_as_starting_and_the_stack_runs_on(tmp_path: Path) -> None:
    shutil.copy(SLOW, tmp_path / "slow_server.py")
    (tmp_path / "servers.toml").write_text(
        f'[servers.slow]\ncommand = "{sys.executable}"\nargs = ["slow_server.py", "{START_S}", "2"]\n'
        "trust_hints = true\n"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL") and not k.startswith("EFFECTGATE_")
    }
    env |= {"EFFECTGATE_UP_READY_TIMEOUT_S": str(READY_TIMEOUT_S), "COLUMNS": "400"}
    env |= {"EFFECTGATE_EXECUTOR_MCP_START_TIMEOUT_S": str(START_TIMEOUT_S)}
    output, state = tmp_path / "up.out", tmp_path / ".effectgate"
    command = [EFFECTGATE, "up", "--mcp-servers", "servers.toml"]
    with output.open("wb") as sink:
        process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        _wait_for(process, output, "Ctrl-C stops everything", timeout_s=180)
        url = _wait_for(process, output, r"NATS_URL=(nats://\S+)", timeout_s=scaled(5))[1]
        _wait_for(process, output, r"mcp_slow: starting since \S+: its first start is under way", timeout_s=scaled(20))
        said = _text(output)
        assert "waiting for MCP server slow to start" in said, said  # a service may be ready when first asked
        assert f"MCP server slow still starting after {READY_TIMEOUT_S} s" in said, said

        early = asyncio.run(_greet(state, url))
        _wait_for(process, output, r"mcp_slow: ready since", timeout_s=START_S + 60)
        later = asyncio.run(_greet(state, url))
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)

    assert early[:2] == ("refused", "tool_unavailable") and "is starting: its first start is under way" in early[2]
    assert later[0] == "succeeded", later
    assert code == 0, _text(output)
    assert (tmp_path / "starts").read_text().split() == ["1", "2"], "the slow start was the executor's one start"
    logs = {path.name: path.read_text(errors="replace") for path in (state / "logs").glob("*.log")}
    assert not [name for name, text in logs.items() if "CRITICAL" in text or "Traceback" in text], logs.keys()
