"""What ``up``, the demo and the bench say about the stack: how secure it is, how clients connect.

Readable at 80 columns: prose wraps between words and keeps its indent; a path, URL or
command is a line of its own printed whole (``soft_wrap``: the terminal may wrap it, a copy
still pastes it as one), the agent's ``export`` is split over continued lines, and digests
are shortened.
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.panel import Panel
from rich.text import Text

from effectgate.cli.render.fitted import short_digest
from effectgate.cli.stack.launch import credentials_dir
from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus.nats_credentials import credentials_file
from effectgate.contracts.bus.nats_permissions import OPERATOR, agent_user

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
        "NATS_URL is set, and `effectgate up` secures only the nats-server it starts itself "
        "(its users, permissions and credentials files). Unset NATS_URL; or run the services "
        "against your own secured server, each with its own EFFECTGATE_NATS_USER and password (see "
        "docker-compose.yml and deploy/nats/nats.conf); or pass --insecure to connect every "
        "service with NATS_URL as given."
    )


def _prose(console: Console, markup: str, indent: int = 2) -> None:
    """A line of rich ``markup`` wrapped between words, every line at ``indent`` (agent text escaped by the caller)."""
    console.print(Padding(Text.from_markup(markup), (0, 0, 0, indent)))


def _whole(console: Console, text: str, indent: int = 4) -> None:
    """A path, URL or command as one line, never broken by the printer (inert text)."""
    console.print(Text(" " * indent + text), soft_wrap=True)


def announce(console: Console, stack: Stack, sandbox: str, state: Path) -> None:
    """Print where everything is and, when secured, exactly how an agent and an approver connect."""
    if stack.credentials is None:
        _prose(console, f"[bold red]effectgate is up — {INSECURE_STATUS}[/bold red]", 0)
    else:
        _prose(
            console, "[green]effectgate is up[/green] — secured: every service, agent and approver its own NATS user", 0
        )
    _whole(console, f"NATS_URL={stack.nats_url}", 2)
    _whole(console, f"REDIS_URL={stack.redis_url}", 2)
    _cluster(console, stack)
    _listening(console, stack)
    if stack.credentials is not None:
        _connection_help(console, stack, credentials_dir(state))
    _whole(console, f"file_system sandbox: {sandbox}", 2)
    if stack.policy_version:
        version = escape(short_digest(stack.policy_version))
        _prose(console, f"policy in force: {version} (`effectgate policy publish FILE` replaces it)")
    _chat_line(console, stack, state)
    _whole(console, f"state: {state}", 2)
    _whole(console, f"logs: {state / 'logs'}/<name>.log", 2)
    _prose(console, "what exits is restarted  ·  Ctrl-C stops everything")


def _listening(console: Console, stack: Stack) -> None:
    """NATS monitoring and each service's health and metrics URL, when ``up`` chose the ports."""
    if stack.ports is None:
        return
    for moved in stack.ports.moved:
        _prose(console, f"[yellow]port:[/yellow] {escape(moved)} (recorded for the next start)")
    ports = stack.ports.chosen
    if "nats" in stack.servers:
        _whole(console, f"NATS monitoring: http://127.0.0.1:{ports['nats-monitoring']}", 2)
    _prose(console, "health and metrics (/livez /readyz /metrics):")
    for name in (name for name in stack.processes if name in ports):
        _whole(console, f"{name:<10} http://127.0.0.1:{ports[name]}")


def _cluster(console: Console, stack: Stack) -> None:
    """Each NATS node (client and monitoring URL), the Redis servers and every service's replicas, when clustered."""
    if stack.cluster is None:
        return
    replicas = stack.env.get("EFFECTGATE_BUS_REPLICAS", "?")
    _prose(console, f"NATS cluster: {len(stack.cluster.nodes)} nodes, streams and buckets at R{replicas}:")
    for name, node in stack.cluster.nodes.items():
        _whole(console, f"{name:<10} {node.url}  monitoring {node.monitoring_url}")
    if stack.sentinels is not None:
        primary, replica = stack.sentinels.primary.url, stack.sentinels.replica.url
        _prose(
            console, escape(f"Redis: primary {primary}, replica {replica}, {len(stack.sentinels.sentinels)} Sentinels")
        )
    _prose(console, "service replicas (pid, health and metrics):")
    for service in dict.fromkeys(stack.services.values()):
        for name in stack.replicas(service):
            port = stack.http_port(name, service)
            where = f"  http://127.0.0.1:{port}" if port is not None else ""
            _whole(console, f"{name:<12} pid {stack.processes[name].pid}{where}")


def _chat_line(console: Console, stack: Stack, state: Path) -> None:
    """Where the chat-ops bot posts cards, when it runs."""
    platform = stack.env.get("EFFECTGATE_CHATOPS_PLATFORM")
    if not platform:
        _prose(console, "chat-ops: off (set EFFECTGATE_CHATOPS_PLATFORM; docs/how-to/chat-ops.md)")
        return
    who = stack.env.get("EFFECTGATE_CHATOPS_MATRIX_USER", "") if platform == "matrix" else "the Slack app"
    rooms = stack.env.get("EFFECTGATE_CHATOPS_ROOMS", "{}")
    _prose(console, escape(f"chat-ops: {platform} bot {who}, cards for roles {rooms}"))
    _whole(console, f"log: {state / 'logs' / 'chatops.log'}")


def _connection_help(console: Console, stack: Stack, folder: Path) -> None:
    agents = (
        sorted(user for user in stack.credentials.inboxes if user.startswith("agent-")) if stack.credentials else []
    )
    agent = agent_user("demo-agent") if agent_user("demo-agent") in agents else (agents or ["agent-<p>"])[0]
    principal = agent.removeprefix("agent-")
    _prose(console, f"credentials (mode 0600), one per agent, approver and the {OPERATOR}:")
    _whole(console, f"{folder}/<user>.json")
    _prose(console, escape(f"an agent connects as its own user, e.g. {principal}:"))
    for line in (
        f"export NATS_URL={stack.nats_url} \\",
        f"  AGENT_CREDENTIALS={credentials_file(folder, agent)} \\",
        f"  EFFECTGATE_PUBLIC_KEYS_DIR={stack.public_keys}",
        f'ToolClient.connect(os.environ["NATS_URL"], "{principal}",',
        '                   credentials=os.environ["AGENT_CREDENTIALS"])',
    ):
        _whole(console, line)
    _prose(console, "approvers answer as themselves:")
    _whole(console, "effectgate approvals approve <approval id> --as <name>")
    _prose(console, f"the other commands connect as {OPERATOR}:")
    _whole(console, str(credentials_file(folder, OPERATOR)))
