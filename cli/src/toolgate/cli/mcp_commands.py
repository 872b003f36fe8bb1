"""``toolgate mcp``: serve the gateway to MCP clients (stdio or Streamable HTTP) and issue their tokens.

``serve`` finds the stack ``toolgate up`` runs from this directory: its NATS URL, its
credentials directory (the surface acts for each principal as ``agent-<p>``) and its public
keys (receipts are verified). ``token add`` writes a static bearer token's SHA-256 into a
token file and prints the token once.
"""

from __future__ import annotations

import os
import re
import secrets
import tomllib
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from toolgate.cli.credentials import write_private
from toolgate.cli.identity import state_dir
from toolgate.cli.rpc import BusError
from toolgate.cli.session import err_console, stack_url
from toolgate.contracts.catalog import TOKEN
from toolgate.shared.logs import configure_logging

__all__ = ["mcp_app"]

mcp_app = typer.Typer(help="Serve toolgate to MCP clients (desktop apps, IDEs, agents).", no_args_is_help=True)
token_app = typer.Typer(help="Static bearer tokens of the HTTP surface.", no_args_is_help=True)
mcp_app.add_typer(token_app, name="token")

DEFAULT_TOKENS = "mcp-tokens.toml"


def _stack_paths() -> dict[str, Any]:
    """The state dir's credentials and public keys, where ``toolgate up`` wrote them."""
    found: dict[str, Any] = {}
    if (credentials := state_dir() / "credentials").is_dir():
        found["credentials_dir"] = credentials
    if (public := state_dir() / "keys" / "public").is_dir() and not os.environ.get("TOOLGATE_PUBLIC_KEYS_DIR"):
        found["public_keys_dir"] = public
    return found


def _settings(chosen: dict[str, Any]) -> Any:
    from toolgate.surface.settings import SurfaceSettings

    given = {name: value for name, value in chosen.items() if value not in (None, [], False)}
    try:
        return SurfaceSettings(**{**_stack_paths(), **given})
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in error.errors())
        err_console.print(f"[red]cannot serve:[/] {problems}")
        raise typer.Exit(2) from None


@mcp_app.command("serve")
def serve(
    stdio: Annotated[bool, typer.Option("--stdio", help="Serve one client over stdin/stdout.")] = False,
    principal: Annotated[str | None, typer.Option("--principal", help="The stdio client's principal.")] = None,
    host: Annotated[str, typer.Option(help="HTTP listen address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port.")] = 8765,
    tokens: Annotated[Path | None, typer.Option("--tokens", help="Static bearer token file (TOML).")] = None,
    oauth_jwks: Annotated[str | None, typer.Option(help="OAuth: the authorization server's JWKS URL or file.")] = None,
    oauth_issuer: Annotated[str | None, typer.Option(help="OAuth: the required issuer.")] = None,
    resource_url: Annotated[str | None, typer.Option(help="OAuth: this surface's URL (the token audience).")] = None,
    open_principal: Annotated[
        str | None, typer.Option(help="INSECURE: no authentication, every request acts as this principal.")
    ] = None,
    flat_tools: Annotated[list[str] | None, typer.Option("--flat-tools", help="Tools listed by own names.")] = None,
    hold: Annotated[float | None, typer.Option("--hold", help="Seconds a call is held before 'pending'.")] = None,
    grace: Annotated[
        float | None, typer.Option("--grace", help="Seconds a write's outcome is returned to identical re-sends.")
    ] = None,
    nats_url: Annotated[str | None, typer.Option("--nats-url", envvar="NATS_URL", help="NATS server.")] = None,
) -> None:
    """Serve the tools each principal may call as an MCP server (stdio, or Streamable HTTP on /mcp)."""
    try:
        url = stack_url(nats_url)
    except BusError as error:
        err_console.print(f"[red]cannot serve:[/] {error}")
        raise typer.Exit(2) from None
    chosen = {
        "nats_url": url, "stdio": stdio, "principal": principal, "host": host, "port": port, "tokens_file": tokens,
        "oauth_jwks": oauth_jwks, "oauth_issuer": oauth_issuer, "resource_url": resource_url,
        "open_principal": open_principal, "flat_tools": flat_tools or [], "hold_s": hold, "grace_s": grace,
    }  # fmt: skip
    settings = _settings(chosen)
    from toolgate.surface.app import run

    configure_logging("surface")
    raise typer.Exit(run(settings))


_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")


@token_app.command("add")
def token_add(
    principal: Annotated[str, typer.Option("--principal", help="The principal the token acts as.")],
    label: Annotated[str, typer.Option("--label", help="A name for the token (logs, revocation).")],
    file: Annotated[Path, typer.Option("--file", help="The token file.")] = Path(DEFAULT_TOKENS),
) -> None:
    """Make a bearer token for ``principal``: its SHA-256 goes into the file, the token is printed once."""
    from toolgate.surface.adapters.tokens import token_digest

    if not TOKEN.match(principal) or not _LABEL.match(label):
        err_console.print(f"[red]refused:[/] principal and label must match {TOKEN.pattern}")
        raise typer.Exit(2)
    text = file.read_text() if file.exists() else "# toolgate MCP surface tokens (SHA-256 of each token only)\n"
    if label in tomllib.loads(text).get("tokens", {}):
        err_console.print(f"[red]refused:[/] {file} already has a token labelled {label}")
        raise typer.Exit(2)
    token = "tgm_" + secrets.token_urlsafe(32)
    entry = f'\n[tokens.{label}]\nprincipal = "{principal}"\nsha256 = "{token_digest(token)}"\n'
    write_private(file, text + entry)
    err_console.print(f"token {label} for {principal} written to {file}; it is shown once:")
    typer.echo(token)
