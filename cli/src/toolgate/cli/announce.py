"""What ``up``, the demo and the bench say about the stack: how secure it is, how clients connect."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from toolgate.cli.stack import Stack, credentials_dir
from toolgate.contracts.nats_credentials import credentials_file
from toolgate.contracts.nats_permissions import OPERATOR, agent_user

__all__ = ["INSECURE_STATUS", "announce", "insecure_banner", "outside_server_refusal"]

INSECURE_STATUS = "INSECURE: NATS has no users; any client may publish, read and approve anything"
"""The status line of a stack started with ``--insecure``."""


def insecure_banner(console: Console) -> None:
    """The red banner printed before an ``--insecure`` stack starts."""
    text = (
        "--insecure: NATS runs WITHOUT users or permissions.\n"
        "Any client that reaches it can publish decisions and approvals, read every receipt\n"
        "and answer approvals as anyone. Only for a throw-away machine; without --insecure\n"
        "every service, agent, approver and the operator connects as its own NATS user."
    )
    console.print(Panel(text, title="INSECURE", style="bold red"))


def outside_server_refusal(insecure: bool) -> str | None:
    """Why a secured ``up`` cannot run with ``NATS_URL`` set; ``None`` when it can."""
    if insecure or not os.environ.get("NATS_URL"):
        return None
    return (
        "NATS_URL is set, and `toolgate up` secures only the nats-server it starts itself "
        "(its users, permissions and credentials files). Unset NATS_URL; or run the services "
        "against your own secured server, each with its own user in its NATS_URL (see "
        "docker-compose.yml and deploy/nats/nats.conf); or pass --insecure to connect every "
        "service with NATS_URL as given."
    )


def announce(console: Console, stack: Stack, sandbox: str, state: Path) -> None:
    """Print where everything is and, when secured, exactly how an agent and an approver connect."""
    if stack.credentials is None:
        console.print(f"[bold red]toolgate is up — {INSECURE_STATUS}[/bold red]")
    else:
        console.print("[green]toolgate is up[/green] — secured: every service, agent and approver its own NATS user")
    console.print(f"  NATS_URL={stack.nats_url}\n  REDIS_URL={stack.redis_url}")
    _listening(console, stack)
    if stack.credentials is not None:
        _connection_help(console, stack, credentials_dir(state))
    console.print(f"  file_system sandbox: {sandbox}")
    if stack.policy_version:
        console.print(f"  policy in force: {stack.policy_version} (`toolgate policy publish FILE` replaces it)")
    _chat_line(console, stack, state)
    console.print(f"  state: {state}", soft_wrap=True)
    console.print(f"  logs: {state / 'logs'}/<name>.log", soft_wrap=True)
    console.print("  what exits is restarted  ·  Ctrl-C stops everything")


def _listening(console: Console, stack: Stack) -> None:
    """NATS monitoring and each service's health and metrics URL, when ``up`` chose the ports."""
    if stack.ports is None:
        return
    ports = stack.ports.chosen
    if "nats" in stack.servers:
        console.print(f"  NATS monitoring: http://127.0.0.1:{ports['nats-monitoring']}")
    console.print("  health and metrics (/livez /readyz /metrics):")
    for name in (name for name in stack.processes if name in ports):
        console.print(f"    {name:<10} http://127.0.0.1:{ports[name]}")


def _chat_line(console: Console, stack: Stack, state: Path) -> None:
    """Where the chat-ops bot posts cards, when it runs."""
    platform = stack.env.get("TOOLGATE_CHATOPS_PLATFORM")
    if not platform:
        console.print("  chat-ops: off (set TOOLGATE_CHATOPS_PLATFORM; README: Approving from chat)")
        return
    who = stack.env.get("TOOLGATE_CHATOPS_MATRIX_USER", "") if platform == "matrix" else "the Slack app"
    rooms = stack.env.get("TOOLGATE_CHATOPS_ROOMS", "{}")
    line = f"  chat-ops: {platform} bot {who}, cards for roles {rooms}; log {state / 'logs' / 'chatops.log'}"
    console.print(escape(line), soft_wrap=True)


def _connection_help(console: Console, stack: Stack, folder: Path) -> None:
    agents = (
        sorted(user for user in stack.credentials.inboxes if user.startswith("agent-")) if stack.credentials else []
    )
    agent = agent_user("demo-agent") if agent_user("demo-agent") in agents else (agents or ["agent-<p>"])[0]
    principal = agent.removeprefix("agent-")
    console.print(f"  credentials: {folder}/<user>.json (mode 0600), one per agent, approver and the {OPERATOR}")
    console.print(f"  an agent connects as its own user, e.g. {principal}:")
    exports = (
        f"export NATS_URL={stack.nats_url} AGENT_CREDENTIALS={credentials_file(folder, agent)} "
        f"TOOLGATE_PUBLIC_KEYS_DIR={stack.public_keys}"
    )
    console.print(f"    {escape(exports)}", soft_wrap=True)
    call = f'ToolClient.connect(os.environ["NATS_URL"], "{principal}", credentials=os.environ["AGENT_CREDENTIALS"])'
    console.print(f"    {escape(call)}", soft_wrap=True)
    console.print("  approvers answer as themselves: toolgate approvals approve <approval id> --as <name>")
    console.print(f"  the other commands connect as {OPERATOR} ({credentials_file(folder, OPERATOR)})", soft_wrap=True)
