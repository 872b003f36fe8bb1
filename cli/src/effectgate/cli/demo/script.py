"""``effectgate demo``: a scripted agent makes real calls through the running system.

A temporary workspace holds real files and a real git repository; nats-server and
redis-server are started on free ports unless ``NATS_URL`` / ``REDIS_URL`` are set.
NATS runs secured (unless ``--insecure``): the agent, the approver (through the real
``effectgate`` command) and the operator each connect with their own credentials file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from rich.console import Console
from rich.panel import Panel

from effectgate.cli.client import rpc
from effectgate.cli.render.views import receipt_row, receipts_table, tools_table, trail_table, utc_time
from effectgate.cli.stack.announce import INSECURE_STATUS
from effectgate.cli.stack.launch import running_stack
from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.bus.nats_permissions import OPERATOR, agent_user
from effectgate.contracts.events import ReceiptIssued
from effectgate.sdk import ToolClient

__all__ = ["mtime_line", "run_demo"]

AGENT = "demo-agent"
APPROVER = "alice"


def _git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Dana Dev",
        "GIT_AUTHOR_EMAIL": "dana@example.org",
        "GIT_COMMITTER_NAME": "Dana Dev",
        "GIT_COMMITTER_EMAIL": "dana@example.org",
    }
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def make_workspace(root: Path) -> tuple[Path, Path, Path]:
    """Create ``sandbox/`` with files, ``repo/`` with three commits and ``effectgate.toml`` (its MCP servers)."""
    sandbox, repo = root / "sandbox", root / "repo"
    (sandbox / "notes").mkdir(parents=True)
    (sandbox / "README.md").write_text("# Team notes\nThe release train leaves on Thursdays.\n")
    (sandbox / "notes" / "todo.txt").write_text("- rotate the staging certificates\n- review the on-call rota\n")
    (root / "outside-secret.txt").write_text("this file is outside the sandbox\n")
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    for n, message in enumerate(("Initial import", "Add deployment notes", "Fix typo in README")):
        (repo / f"file{n}.txt").write_text(f"revision {n}\n")
        _git(repo, "add", ".")
        _git(repo, "commit", "-q", "-m", message)
    servers = root / "effectgate.toml"
    servers.write_text(
        '[mcp.servers.time]\ncommand = "mcp-server-time"\nargs = ["--local-timezone", "UTC"]\ntrust_hints = true\n\n'
        f'[mcp.servers.git]\ncommand = "mcp-server-git"\nargs = ["--repository", "{repo}"]\n'
        f'pinned_arguments = {{ repo_path = "{repo}" }}\ntrust_hints = true\n'
    )
    return sandbox, repo, servers


def run_demo(console: Console, insecure: bool = False) -> int:
    """Run the whole demo (NATS secured unless ``insecure``); return the exit code (0 when every step behaved)."""
    root = Path(tempfile.mkdtemp(prefix="effectgate-demo-"))
    sandbox, repo, servers = make_workspace(root)
    console.print(Panel(f"workspace {root}\nsandbox   {sandbox}\ngit repo  {repo}", title="effectgate demo"))
    env = {"EFFECTGATE_EXECUTOR_SANDBOX_ROOT": str(sandbox), "EFFECTGATE_CONFIG": str(servers)}
    with contextlib.ExitStack() as resources:
        with console.status("starting nats-server, redis-server and the five services…"):
            stack = resources.enter_context(running_stack(root / "state", env, auth="open" if insecure else "secured"))
        console.print(f"[dim]NATS {stack.nats_url} · Redis {stack.redis_url} · logs {root / 'state' / 'logs'}[/dim]")
        if stack.credentials is None:
            console.print(f"[bold red]{INSECURE_STATUS}[/bold red]")
        failures = asyncio.run(_script(console, stack, sandbox, repo))
    console.print("[bold green]demo finished[/bold green]" if not failures else f"[bold red]{failures}[/bold red]")
    console.print("To approve from chat instead of the CLI: ./dev demo --chat matrix (docs/how-to/chat-ops.md)")
    return 0 if not failures else 1


class _Steps:
    def __init__(self, console: Console) -> None:
        self.console, self.table = console, receipts_table("What the agent asked, and the receipts")
        self.failures: list[str] = []

    def show(self, step: str, call: str, receipt: ReceiptIssued, expected: str) -> None:
        receipt_row(self.table, step, call, receipt)
        if receipt.outcome.value != expected:
            self.failures.append(f"{step}: expected {expected}, got {receipt.outcome.value}")


async def _script(console: Console, stack: Stack, sandbox: Path, repo: Path) -> list[str]:
    steps = _Steps(console)
    options = stack.connect_options(agent_user(AGENT))
    async with await ToolClient.connect(stack.nats_url, AGENT, public_keys=stack.public_keys, **options) as agent:
        console.print(tools_table(await agent.list_tools()))
        write_id = await _files(steps, agent, stack, sandbox)
        await _rate_limit(steps, agent)
        await _mcp(steps, agent, repo)
        console.print(steps.table)
    await _audit(console, stack, write_id)
    return steps.failures


async def _files(steps: _Steps, agent: ToolClient, stack: Stack, sandbox: Path) -> str:
    steps.show(
        "1 read a file",
        "file_system.read README.md",
        await agent.invoke("file_system", "read", {"path": "README.md"}),
        "succeeded",
    )
    steps.show(
        "2 read outside",
        "file_system.read ../outside-secret.txt",
        await agent.invoke("file_system", "read", {"path": "../outside-secret.txt"}),
        "refused",
    )
    key = f"report-{uuid.uuid4().hex[:8]}"
    arguments = {"path": "reports/weekly.md", "content": "# Weekly report\nAll systems nominal.\n"}
    request_id = await agent.submit("file_system", "write", arguments, idempotency_key=key)
    approval_id = await _await_approval(stack, request_id)
    command = f"EFFECTGATE_STATE_DIR={stack.state_dir} ./dev effectgate approvals approve {approval_id} --as {APPROVER}"
    steps.console.print(f"[bold]write needs approval[/bold] {approval_id}; the approver runs:")
    steps.console.print(f"  $ {command}", soft_wrap=True)
    _cli(stack, "approvals", "approve", approval_id, "--as", APPROVER)
    steps.show(
        "3 write (approved)", "file_system.write reports/weekly.md", await agent.receipt(request_id), "succeeded"
    )
    before = (sandbox / "reports" / "weekly.md").stat().st_mtime_ns
    steps.show(
        "4 same key again",
        "file_system.write (same idempotency key)",
        await agent.invoke("file_system", "write", arguments, idempotency_key=key),
        "replayed",
    )
    after = (sandbox / "reports" / "weekly.md").stat().st_mtime_ns
    steps.console.print(mtime_line(before, after))
    if before != after:
        steps.failures.append("the replay wrote the file again")
    return request_id


def mtime_line(before_ns: int, after_ns: int) -> str:
    """The demo's replay check (rich markup): the file's modification times as UTC times, and whether they differ.

    Args:
        before_ns: modification time before the replay, nanoseconds since the epoch.
        after_ns: the same after it.
    """
    verdict = "[green]unchanged[/green]" if before_ns == after_ns else "[red]CHANGED[/red]"
    shown = (utc_time(before_ns / 1e9), utc_time(after_ns / 1e9))
    return f"file written once: modified at {shown[0]} before the replay, {shown[1]} after → {verdict}"


async def _operator(stack: Stack) -> rpc.Bus:
    return await rpc.Bus.connect(stack.nats_url, OPERATOR, **stack.connect_options(OPERATOR))


async def _await_approval(stack: Stack, request_id: str) -> str:
    bus = await _operator(stack)
    try:
        for _ in range(100):
            for item in (await rpc.pages(bus, Rpc.APPROVALS_LIST, {}, "approvals")).items:
                if item["request_id"] == request_id:
                    return str(item["approval_id"])
            await asyncio.sleep(0.1)
    finally:
        await bus.close()
    raise TimeoutError(f"no approval opened for {request_id}")


def _cli(stack: Stack, *args: str) -> None:
    """The real ``effectgate`` command on this stack: its identity from the stack's credentials files."""
    env = {**os.environ, "NATS_URL": stack.nats_url, "EFFECTGATE_STATE_DIR": str(stack.state_dir)}
    env.pop("EFFECTGATE_CREDENTIALS", None)
    subprocess.run([sys.executable, "-m", "effectgate.cli", *args], env=env, check=True)


async def _rate_limit(steps: _Steps, agent: ToolClient) -> None:
    for n in range(1, 11):
        receipt = await agent.invoke("file_system", "list", {"path": "notes"})
        if receipt.outcome.value == "denied":
            steps.show(f"5 list #{n}", "file_system.list notes (rate limit 5/min)", receipt, "denied")
            return
    steps.failures.append("the rate limit never applied")


async def _mcp(steps: _Steps, agent: ToolClient, repo: Path) -> None:
    steps.show(
        "6 ask the time",
        "mcp_time.get_current_time UTC",
        await agent.invoke("mcp_time", "get_current_time", {"timezone": "UTC"}),
        "succeeded",
    )
    steps.show(
        "7 read the git log",
        "mcp_git.git_log",
        await agent.invoke("mcp_git", "git_log", {"repo_path": str(repo), "max_count": 3}),
        "succeeded",
    )


async def _audit(console: Console, stack: Stack, request_id: str) -> None:
    bus = await _operator(stack)
    try:
        for _ in range(50):
            trail = await rpc.request(bus, Rpc.AUDIT_TRAIL, {"request_id": request_id})
            if any(r["event_type"] == "receipt.issued" for r in trail["records"]):
                break
            await asyncio.sleep(0.1)
        console.print(trail_table(request_id, trail["records"]))
    finally:
        await bus.close()
    _cli(stack, "audit", "verify")
