"""Helpers of the operator-mode (JWT) tests: an output directory, a connection by creds file, the revoke command."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from nats.aio.msg import Msg
from typer.testing import CliRunner, Result

from effectgate.cli.app import app
from effectgate.cli.commands.nats_jwt_files import Layout, initialise
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.bus.nats_accounts import nats_accounts
from effectgate.contracts.bus.nats_permissions import NatsUser, agent_user
from tests.deploy.test_nats_permissions import DIRECTORY, Conn, connect

ACCOUNTS = nats_accounts(DIRECTORY)
USERS: dict[str, NatsUser] = {user.name: user for account in ACCOUNTS for user in account.users}
AGENT, OTHER = agent_user("demo-agent"), agent_user("other-agent")
REVOKED_WITHIN_S = 5.0
"""How soon after ``revoke`` returns the server must have closed the revoked agent's connection."""


def init(out: Path, resolver: Path) -> Path:
    """``out`` holding the operator, accounts and users of the permissions tests' directory."""
    initialise(ACCOUNTS, out, resolver, int(time.time()))
    return out


def options(out: Path, user: str) -> dict[str, Any]:
    """``nats.connect`` options of ``user``: its credentials file, its private inbox prefix."""
    prefix = USERS[user].inbox_prefix
    return {"user_credentials": str(Layout(out).creds(user))} | ({"inbox_prefix": prefix.encode()} if prefix else {})


async def connect_as(url: str, out: Path, user: str, closed: asyncio.Event | None = None) -> Conn:
    """``user`` connected to ``url`` with its credentials file (no reconnect); ``closed`` is set when it closes."""

    async def on_closed() -> None:
        if closed is not None:
            closed.set()

    return await connect(url, {**options(out, user), "closed_cb": on_closed})


async def revoke(out: Path, user: str, servers: str) -> Result:
    """``effectgate nats-jwt revoke USER --out OUT --servers SERVERS``, run as a person would (off the loop)."""
    arguments = ["nats-jwt", "revoke", user, "--out", str(out), "--servers", servers]
    return await asyncio.to_thread(CliRunner().invoke, app, arguments)


async def serve_listings(conn: Conn, *principals: str) -> None:
    """Answer ``tools.list`` of ``principals`` with ``{}`` (the policy service's stand-in)."""

    async def respond(msg: Msg) -> None:
        await msg.respond(b"{}")

    for principal in principals:
        await conn.nc.subscribe(Rpc.tools_list(principal), queue="policy", cb=respond)
    await conn.nc.flush()
