"""``effectgate nats-jwt``: the accounts of ``nats-config`` in operator mode (JWT), and revocation without a restart.

``init`` writes the operator, the accounts and the users' credentials
(:mod:`effectgate.cli.commands.nats_jwt_files`); ``revoke`` re-signs a user's account with the
user revoked and pushes it to the running servers: the account JWT is published on
``$SYS.REQ.CLAIMS.UPDATE`` as the system user, and each server must answer ``jwt updated``
(nats-server ``ServerAPIClaimUpdateResponse``; a ``full`` resolver passes it on to its cluster).
The server then closes every connection of the revoked user ("User Authentication Revoked")
and refuses its credentials from then on.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import nats
import typer
from rich.markup import escape

from effectgate.cli.client.session import console, err_console
from effectgate.cli.commands.nats_jwt_files import Layout, account_jwts, initialise, revoke
from effectgate.contracts.bus.nats_accounts import nats_accounts
from effectgate.contracts.bus.nats_credentials import NatsUrlInvalid, split_servers
from effectgate.contracts.directory import DirectoryInvalid, load_directory
from effectgate.contracts.errors import Problem
from effectgate.shared.config.nats_jwt.claims import SYSTEM_USER
from effectgate.shared.config.nats_jwt.encoding import JwtInvalid
from effectgate.shared.runtime.connections import CA_FILE_ENV, NatsUnreachable, connect_once, redact, tls_options

__all__ = ["CLAIMS_UPDATE", "PushRefused", "nats_jwt_app", "push"]

CLAIMS_UPDATE = "$SYS.REQ.CLAIMS.UPDATE"
"""Where a server's resolver takes an account JWT (the system account's subject)."""

nats_jwt_app = typer.Typer(
    help="NATS in operator mode: JWT accounts and users, revocable without a restart.", no_args_is_help=True
)


class PushRefused(Problem):
    """A server did not take an account JWT (or did not answer); the message names it and why."""


async def push(servers: Iterable[str], creds: Path, tokens: Iterable[str], timeout_s: float = 5.0) -> int:
    """Publish each account JWT of ``tokens`` to each server of ``servers``, as the system user of ``creds``.

    Returns:
        How many updates the servers confirmed.

    Raises:
        NatsUnreachable: a server cannot be reached; PushRefused: a server refused or did not answer.
    """
    tokens, done = list(tokens), 0
    tls = tls_options(os.environ.get(CA_FILE_ENV))
    for server in servers:
        nc = await connect_once(server, timeout_s, user_credentials=str(creds), **tls)
        try:
            for token in tokens:
                _confirmed(server, (await nc.request(CLAIMS_UPDATE, token.encode(), timeout=timeout_s)).data)
                done += 1
        except nats.errors.Error as error:
            raise PushRefused(f"{redact(server)}: no answer to the account update ({type(error).__name__})") from None
        finally:
            await nc.close()
    return done


def _confirmed(server: str, answer: bytes) -> None:
    """Raise unless ``answer`` is a server's ``{"data": {"code": 200, ...}}``."""
    try:
        reply = json.loads(answer)
    except ValueError:
        reply = {}
    reply = reply if isinstance(reply, dict) else {}
    data, error = reply.get("data"), reply.get("error")
    if not isinstance(data, dict) or data.get("code") != 200:
        why = error.get("description") if isinstance(error, dict) else answer[:200].decode(errors="replace")
        raise PushRefused(f"{redact(server)} refused the account update: {why}")


Out = Annotated[Path, typer.Option("--out", help="The directory of the operator, accounts and users (kept 0700).")]
Principals = Annotated[Path, typer.Option(help="Principal directory TOML: its agents (principals) and approvers.")]
Servers = Annotated[
    str | None,
    typer.Option(
        "--servers", envvar="NATS_URL", help="Running nats-servers to push to (comma-separated; each must confirm)."
    ),
]
ResolverDir = Annotated[
    Path | None, typer.Option(help="Each server's own JWT store (resolver dir; default <out>/resolver).")
]
Admin = Annotated[bool, typer.Option(help="Add the user `admin` with every right (a test observer; never production).")]


def _fail(error: Exception) -> typer.Exit:
    err_console.print("[red]error:[/red]", escape(redact(str(error))))
    return typer.Exit(2)


def _push(servers: str | None, out: Path, tokens: list[str]) -> None:
    if servers:
        count = asyncio.run(push(split_servers(servers), Layout(out).creds(SYSTEM_USER), tokens))
        console.print(f"{count} account update(s) confirmed by {servers.count(',') + 1} server(s)")


@nats_jwt_app.command("init")
def init(
    principals: Principals, out: Out, resolver_dir: ResolverDir = None, admin: Admin = False, servers: Servers = None
) -> None:
    """Write the operator, one account per party and one credentials file per user under --out.

    Existing keys are kept (a re-run re-signs with them); revocations are kept. With --servers,
    every account JWT is pushed to the running servers (new agents without a restart).
    """
    try:
        accounts = nats_accounts(load_directory(principals), admin=admin)
        done = initialise(accounts, out, (resolver_dir or out / "resolver").absolute(), int(time.time()))
        _push(servers, out, list(account_jwts(out).values()))
    except (DirectoryInvalid, JwtInvalid, OSError, ValueError, NatsUnreachable, NatsUrlInvalid, PushRefused) as error:
        raise _fail(error) from None
    console.print(
        f"{len(done.signed.users) if done.signed else 0} users in {out}; new keys: {', '.join(done.created) or 'none'}"
    )
    console.print(f"run: nats-server -js -sd <store> -c {out / 'server.conf'}")


@nats_jwt_app.command("revoke")
def revoke_user(user: str, out: Out, servers: Servers = None) -> None:
    """Revoke USER (e.g. agent-demo-agent): its account re-signed with the user's key revoked now, and pushed.

    The servers close the user's connections and refuse its credentials; the next `init`
    gives the user a new key. Without --servers, only the files change (push them with `init --servers`).
    """
    if user == SYSTEM_USER:
        raise _fail(ValueError(f"{SYSTEM_USER} pushes the updates: it cannot be revoked with them"))
    try:
        account, token = revoke(user, out, int(time.time()))
        _push(servers, out, [token])
    except (JwtInvalid, NatsUnreachable, NatsUrlInvalid, PushRefused, ValueError, OSError) as error:
        raise _fail(error) from None
    console.print(f"{escape(user)} revoked in account {escape(account)}")
