"""``effectgate up`` is secured by default: the real command, its credentials files, and the CLI identities.

Each stack here is the real ``effectgate up`` process (nats-server, redis-server and the five
services, principals from ``deploy/policy/principals.toml``), driven through the real
``effectgate`` command and the SDK, as a person would from a fresh checkout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest

from effectgate.cli.client import rpc
from effectgate.cli.render.fitted import short_digest
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.bus.nats_credentials import load_credentials
from effectgate.contracts.bus.nats_permissions import AUDITOR, OPERATOR
from effectgate.sdk import ToolClient
from effectgate.shared.stores.policy_kv import policy_digest

pytestmark = pytest.mark.e2e

EFFECTGATE = str(Path(sys.executable).parent / "effectgate")
CLIENT_USERS = {
    "mcp-surface",
    "agent-bench-agent",
    "agent-demo-agent",
    "agent-ops-agent",
    "approver-alice",
    "approver-bob",
    "approver-carol",
    OPERATOR,
    AUDITOR,
}
"""The agents and approvers of deploy/policy/principals.toml, the operator and the auditor."""


@dataclass
class Up:
    """A running ``effectgate up``: its working directory, process, output and NATS URL."""

    cwd: Path
    process: subprocess.Popen[bytes]
    output: Path
    nats_url: str = ""

    @property
    def state(self) -> Path:
        return self.cwd / ".effectgate"

    @property
    def credentials(self) -> Path:
        return self.state / "credentials"

    @property
    def public_keys(self) -> Path:
        """Every public key ``up`` laid out (receipts, sealing, …)."""
        return self.state / "keys" / "public"

    def text(self) -> str:
        return self.output.read_text(errors="replace")


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL") and not k.startswith("EFFECTGATE_")
    }
    env.update({"COLUMNS": "400", **extra})
    return env


@contextlib.contextmanager
def _up(cwd: Path, *args: str) -> Iterator[Up]:
    cwd.mkdir(parents=True, exist_ok=True)
    output = cwd / "up.out"
    with output.open("wb") as sink:
        process = subprocess.Popen(
            [EFFECTGATE, "up", *args], cwd=cwd, env=_env(), stdout=sink, stderr=subprocess.STDOUT
        )
    running = Up(cwd, process, output)
    try:
        running.nats_url = _wait_until_up(running)
        yield running
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_up(running: Up, timeout_s: float = 120.0) -> str:
    deadline = time.monotonic() + timeout_s
    while not (found := re.search(r"NATS_URL=(nats://\S+)", running.text())):
        assert running.process.poll() is None, f"effectgate up exited: {running.text()}"
        assert time.monotonic() < deadline, f"effectgate up not up after {timeout_s}s: {running.text()}"
        time.sleep(0.2)
    return found[1]


def _effectgate(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EFFECTGATE, *args], cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=60)


async def _quiet(error: Exception) -> None:
    pass


# --- how a stack becomes open: only by asking loudly ---------------------------------------------


def test_up_refuses_a_server_it_cannot_secure_unless_insecure(tmp_path: Path) -> None:
    refused = _effectgate(tmp_path, "up", NATS_URL="nats://127.0.0.1:9")
    assert refused.returncode == 2
    assert "NATS_URL is set" in refused.stderr and "--insecure" in refused.stderr
    assert not (tmp_path / ".effectgate").exists(), "nothing may start before the refusal"


async def test_insecure_is_loud_and_the_only_way_to_an_open_server(tmp_path: Path) -> None:
    with _up(tmp_path / "open", "--insecure") as running:
        text = running.text()
        assert text.index("INSECURE") < text.index("effectgate is up"), "the banner comes before anything starts"
        assert re.search(r"effectgate is up — INSECURE", text), text
        assert not running.credentials.exists()
        anonymous = await nats.connect(running.nats_url, allow_reconnect=False)
        await anonymous.close()
        logs = {path.stem: path.read_text() for path in (running.state / "logs").glob("*.log")}
        warned = {name for name, log in logs.items() if "INSECURE: NATS at" in log}
        assert warned == {"registry", "policy", "approvals", "executor", "audit"}, warned


# --- the secured stack people start first ----------------------------------------------------------


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    with _up(tmp_path_factory.mktemp("up") / "checkout") as running:
        yield running


def test_up_writes_one_private_credentials_file_per_agent_approver_and_the_operator(up: Up) -> None:
    assert stat.S_IMODE(up.credentials.stat().st_mode) == 0o700
    files = {path.stem: path for path in up.credentials.iterdir()}
    assert set(files) == CLIENT_USERS, "services and admin get no file; every client of the directory does"
    for path in files.values():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert load_credentials(path)["user"] == path.stem
    assert '"admin"' not in (up.state / "nats-auth.conf").read_text(), "admin exists in tests only"
    assert "secured" in up.text() and "INSECURE" not in up.text()


@pytest.mark.parametrize("user", sorted(CLIENT_USERS))
async def test_each_credentials_file_connects_and_nothing_else_does(up: Up, user: str) -> None:
    nc = await nats.connect(up.nats_url, allow_reconnect=False, **load_credentials(up.credentials / f"{user}.json"))
    await nc.close()
    wrong = {**load_credentials(up.credentials / f"{user}.json"), "password": "Wrong-password-0123456789"}
    for options in ({}, wrong, {"user": "admin", "password": "Any-password-0123456789"}):
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):
            await nats.connect(up.nats_url, allow_reconnect=False, error_cb=_quiet, **options)


async def test_the_printed_agent_connection_works(up: Up) -> None:
    continued = r" \\\n +"  # the export is printed over lines joined by backslashes, as a shell reads it
    exports = rf"export NATS_URL=(\S+){continued}AGENT_CREDENTIALS=(\S+){continued}EFFECTGATE_PUBLIC_KEYS_DIR=(\S+)"
    printed = re.search(exports, up.text())
    assert printed, up.text()
    call = 'ToolClient.connect(os.environ["NATS_URL"], "demo-agent", credentials=os.environ["AGENT_CREDENTIALS"])'
    assert call in " ".join(up.text().split()), "printed over two lines, as Python reads it"
    url, credentials, keys = printed[1], printed[2], Path(printed[3])
    assert Path(credentials) == up.credentials / "agent-demo-agent.json"
    assert keys == up.public_keys
    (up.state / "sandbox" / "hello.txt").write_text("hello\n")
    async with await ToolClient.connect(url, "demo-agent", credentials=credentials, public_keys=keys) as agent:
        receipt = await agent.invoke("file_system", "read", {"path": "hello.txt"}, timeout_s=30)
    assert receipt.outcome.value == "succeeded", receipt.reason


async def test_an_agent_with_a_wrong_password_is_told_at_once(up: Up, tmp_path: Path) -> None:
    """Refused credentials end the SDK's connect at once; retrying could never help."""
    wrong = tmp_path / "agent-demo-agent.json"
    options = {**load_credentials(up.credentials / "agent-demo-agent.json"), "password": "Wrong-password-0123456789"}
    wrong.write_text(json.dumps(options))
    wrong.chmod(0o600)
    started = time.monotonic()
    with pytest.raises(PermissionError, match="(?i)authorization violation"):
        await ToolClient.connect(up.nats_url, "demo-agent", credentials=wrong, public_keys=up.public_keys)
    assert time.monotonic() - started < 10, "the SDK retried credentials the server had refused"


async def test_an_agents_credentials_act_for_that_agent_only(up: Up) -> None:
    with pytest.raises(ValueError, match="agent-ops-agent, not of agent-demo-agent"):
        await ToolClient.connect(
            up.nats_url, "demo-agent", credentials=up.credentials / "agent-ops-agent.json", public_keys=up.public_keys
        )


async def _pending_approval(up: Up, request_id: str) -> str:
    bus = await rpc.Bus.connect(up.nats_url, OPERATOR, **load_credentials(up.credentials / "operator.json"))
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for item in (await rpc.pages(bus, Rpc.APPROVALS_LIST, {}, "approvals")).items:
                if item["request_id"] == request_id:
                    return str(item["approval_id"])
            await asyncio.sleep(0.2)
    finally:
        await bus.close()
    raise TimeoutError(f"no approval opened for {request_id}")


HOLDERS = {
    # what the caller holds: (environment of the command, what the error must name)
    "bob's file": ("approver-bob", "NATS user approver-bob may not publish to tg.approvals.decide.alice"),
    "an agent's file": ("agent-demo-agent", "NATS user agent-demo-agent may not publish to tg.approvals.decide.alice"),
    "the operator's file": ("operator", "NATS user operator may not publish to tg.approvals.decide.alice"),
}


async def test_only_alices_credentials_answer_as_alice(up: Up) -> None:
    credentials = up.credentials / "agent-demo-agent.json"
    async with await ToolClient.connect(
        up.nats_url, "demo-agent", credentials=credentials, public_keys=up.public_keys
    ) as agent:
        arguments = {"path": "approved.txt", "content": "approved by alice\n"}
        request_id = await agent.submit("file_system", "write", arguments)
        approval_id = await _pending_approval(up, request_id)
        for holder, (user, refusal) in HOLDERS.items():
            held = str(up.credentials / f"{user}.json")
            refused = _effectgate(
                up.cwd, "approvals", "approve", approval_id, "--as", "alice", EFFECTGATE_CREDENTIALS=held
            )
            assert refused.returncode == 2, (holder, refused.stdout, refused.stderr)
            assert refusal in " ".join(refused.stderr.split()), (holder, refused.stderr)
            assert "needs alice's own credentials" in " ".join(refused.stderr.split())
        assert await _pending_approval(up, request_id) == approval_id, "no refused attempt answered it"
        granted = _effectgate(up.cwd, "approvals", "approve", approval_id, "--as", "alice")
        assert granted.returncode == 0, granted.stderr
        assert "granted" in granted.stdout
        receipt = await agent.receipt(request_id, timeout_s=30)
    assert receipt.outcome.value == "succeeded", receipt.reason
    assert (up.state / "sandbox" / "approved.txt").read_text() == "approved by alice\n"


def test_a_caller_without_the_approvers_file_is_told_which_file_is_missing(up: Up, tmp_path: Path) -> None:
    (tmp_path / "credentials").mkdir(mode=0o700)
    bob = tmp_path / "credentials" / "approver-bob.json"
    bob.write_bytes((up.credentials / "approver-bob.json").read_bytes())
    bob.chmod(0o600)
    refused = _effectgate(
        up.cwd, "approvals", "approve", "ap-000000000000", "--as", "alice", EFFECTGATE_STATE_DIR=str(tmp_path)
    )
    assert refused.returncode == 2
    assert f"no credentials for approver 'alice': {tmp_path}/credentials/approver-alice.json does not exist" in (
        " ".join(refused.stderr.split()).replace("/ ", "/")
    )


def test_a_credentials_file_others_may_read_is_refused(up: Up, tmp_path: Path) -> None:
    loose = tmp_path / "operator.json"
    loose.write_bytes((up.credentials / "operator.json").read_bytes())
    loose.chmod(0o644)
    refused = _effectgate(up.cwd, "approvals", "list", EFFECTGATE_CREDENTIALS=str(loose))
    assert refused.returncode == 2
    assert "may be read by others (mode 0644)" in " ".join(refused.stderr.split())


@pytest.mark.parametrize(
    ("args", "shows", "agent_may"),
    [
        (("tools", "list"), "file_system", False),  # an agent lists only its own tools (tg.tools.list.<p>)
        (("approvals", "list"), "", False),
        (("audit", "verify"), "audit chain intact", False),
    ],
)
def test_other_commands_connect_as_the_operator(up: Up, args: tuple[str, ...], shows: str, agent_may: bool) -> None:
    done = _effectgate(up.cwd, *args)
    assert done.returncode == 0, done.stderr
    assert shows in done.stdout
    as_agent = _effectgate(up.cwd, *args, EFFECTGATE_CREDENTIALS=str(up.credentials / "agent-demo-agent.json"))
    if agent_may:
        assert as_agent.returncode == 0, as_agent.stderr
    else:
        assert as_agent.returncode == 2
        assert "permission refused: NATS user agent-demo-agent may not publish to" in " ".join(as_agent.stderr.split())


def test_up_names_the_policy_in_force_and_only_the_operator_publishes_one(up: Up, repo_root: Path) -> None:
    shipped = repo_root / "deploy/policy/policy.cedar"
    line = f"policy in force: {short_digest(policy_digest(shipped.read_text()))}"
    deadline = time.monotonic() + 10
    while line not in up.text():
        assert time.monotonic() < deadline, up.text()
        time.sleep(0.1)
    done = _effectgate(up.cwd, "policy", "publish", str(shipped))
    assert done.returncode == 0 and "already in force" in done.stdout, done.stdout + done.stderr
    for holder in ("agent-demo-agent", "approver-alice"):
        refused = _effectgate(
            up.cwd, "policy", "publish", str(shipped), EFFECTGATE_CREDENTIALS=str(up.credentials / f"{holder}.json")
        )
        said = " ".join(refused.stderr.split())
        assert refused.returncode == 2 and f"{holder} may not publish to tg.policy.publish" in said, said
