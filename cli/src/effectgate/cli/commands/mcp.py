"""``effectgate mcp``: serve the gateway to MCP clients (stdio or Streamable HTTP) and issue their tokens.

``serve`` finds the stack ``effectgate up`` runs from this directory: its NATS URL, its
credentials directory (the surface acts for each principal as ``agent-<p>``) and its public
keys (receipts are verified).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import tomllib
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.markup import escape

from effectgate.cli.client.identity import state_dir
from effectgate.cli.client.rpc import BusError
from effectgate.cli.client.session import err_console, stack_url
from effectgate.cli.render.output import did_you_mean
from effectgate.cli.stack.credentials import write_private
from effectgate.cli.stack.files import PRINCIPALS_ENV, PrincipalsOption, service_file
from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.directory import DirectoryInvalid, load_directory
from effectgate.shared.runtime.logs import configure_logging

__all__ = ["mcp_app"]

mcp_app = typer.Typer(help="Serve effectgate to MCP clients (desktop apps, IDEs, agents).", no_args_is_help=True)
token_app = typer.Typer(help="Static bearer tokens of the HTTP surface.", no_args_is_help=True)
mcp_app.add_typer(token_app, name="token")

DEFAULT_TOKENS = "mcp-tokens.toml"


def _stack_paths() -> dict[str, Any]:
    """The state dir's credentials and public keys, where ``effectgate up`` wrote them."""
    found: dict[str, Any] = {}
    if (credentials := state_dir() / "credentials").is_dir():
        found["credentials_dir"] = credentials
    if (public := state_dir() / "keys" / "public").is_dir() and not os.environ.get("EFFECTGATE_PUBLIC_KEYS_DIR"):
        found["public_keys_dir"] = public
    return found


def _settings(chosen: dict[str, Any]) -> Any:
    from effectgate.surface.settings import SurfaceSettings

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
    hold: Annotated[
        float,
        typer.Option("--hold", envvar="EFFECTGATE_SURFACE_HOLD_S", help="Seconds a call is held before 'pending'."),
    ] = 20.0,
    grace: Annotated[
        float,
        typer.Option(
            "--grace", envvar="EFFECTGATE_SURFACE_GRACE_S", help="Seconds a write's outcome is returned to re-sends."
        ),
    ] = 600.0,
    nats_url: Annotated[str | None, typer.Option("--nats-url", envvar="NATS_URL", help="NATS server.")] = None,
) -> None:
    """Serve the tools each principal may call as an MCP server (stdio, or Streamable HTTP on /mcp)."""
    if stdio and not principal:
        err_console.print("[red]cannot serve:[/] --stdio needs --principal NAME (the agent the desktop client acts as)")
        raise typer.Exit(2)
    try:
        url = stack_url(nats_url)
    except BusError as error:
        hint = "; a client that starts this elsewhere sets EFFECTGATE_STATE_DIR to the stack's .effectgate directory"
        err_console.print(f"[red]cannot serve:[/] {error}{hint}")
        raise typer.Exit(2) from None
    chosen = {
        "nats_url": url, "stdio": stdio, "principal": principal, "host": host, "port": port, "tokens_file": tokens,
        "oauth_jwks": oauth_jwks, "oauth_issuer": oauth_issuer, "resource_url": resource_url,
        "open_principal": open_principal, "flat_tools": flat_tools or [], "hold_s": hold, "grace_s": grace,
    }  # fmt: skip
    settings = _settings(chosen)
    from effectgate.surface.app import run

    configure_logging("surface")
    raise typer.Exit(run(settings))


_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
_SCOPE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]{1,128}\Z")
"""RFC 6749 §3.3 ``scope-token``: printable ASCII without space, ``"`` and ``\\``."""
_HEADER = "# effectgate MCP surface tokens: [tokens.<label>] principal, sha256 of the token, scopes\n"
TokensFile = Annotated[Path, typer.Option("--file", help="The token file.")]


def _entries(file: Path) -> dict[str, dict[str, Any]]:
    try:
        return dict(tomllib.loads(file.read_text()).get("tokens", {})) if file.exists() else {}
    except (OSError, tomllib.TOMLDecodeError) as error:
        err_console.print(f"[red]refused:[/] {file}: {error}")
        raise typer.Exit(2) from None


def _write(file: Path, entries: dict[str, dict[str, Any]]) -> None:
    tables = [
        f'\n[tokens.{label}]\nprincipal = "{entry["principal"]}"\nsha256 = "{entry["sha256"]}"\n'
        + (f"scopes = {json.dumps(entry['scopes'])}\n" if "scopes" in entry else "")
        for label, entry in entries.items()
    ]
    write_private(file, _HEADER + "".join(tables))


@token_app.command("add")
def token_add(
    principal: Annotated[str, typer.Option("--principal", help="The principal the token acts as.")],
    label: Annotated[str, typer.Option("--label", help="A name for the token (logs, revocation).")],
    scope: Annotated[
        list[str] | None, typer.Option("--scope", help="A scope it holds (default effectgate:tools).")
    ] = None,
    file: TokensFile = Path(DEFAULT_TOKENS),
    principals: PrincipalsOption = None,
) -> None:
    """Make a bearer token for a principal of the directory: its SHA-256 goes into the file; printed once."""
    from effectgate.surface.adapters.tokens import token_digest

    if not TOKEN.match(principal) or not _LABEL.match(label):
        err_console.print(f"[red]refused:[/] principal and label must match {TOKEN.pattern}")
        raise typer.Exit(2)
    _known_principal(principal, service_file(PRINCIPALS_ENV, principals))
    if not all(_SCOPE.match(each) for each in scope or []):
        err_console.print("[red]refused:[/] a scope is printable ASCII without spaces, quotes or backslashes")
        raise typer.Exit(2)
    entries = _entries(file)
    if label in entries:
        err_console.print(f"[red]refused:[/] {file} already has a token labelled {label} (revoke it first)")
        raise typer.Exit(2)
    token = "tgm_" + secrets.token_urlsafe(32)
    entries[label] = {"principal": principal, "sha256": token_digest(token), **({"scopes": scope} if scope else {})}
    _write(file, entries)
    err_console.print(f"token {label} for {principal} written to {file}; it is shown once:")
    typer.echo(token)


def _known_principal(principal: str, directory_file: Path) -> None:
    """Refuse (exit 2) a principal the directory does not list, naming the closest; an unreadable directory too."""
    try:
        known = load_directory(directory_file).principals
    except DirectoryInvalid as error:
        err_console.print(f"[red]refused:[/] cannot check principal {principal!r}:", escape(error.reason))
        raise typer.Exit(2) from None
    if principal not in known:
        hint = did_you_mean(principal, known)
        err_console.print(
            f"[red]refused:[/] principal {principal!r} is not in the principal directory",
            escape(f"{directory_file}{hint}"),
        )
        raise typer.Exit(2)


@token_app.command("list")
def token_list(file: TokensFile = Path(DEFAULT_TOKENS)) -> None:
    """The tokens of the file: label, principal, scopes (never the tokens: the file holds digests only)."""
    for label, entry in _entries(file).items():
        typer.echo(f"{label}\t{entry.get('principal')}\t{' '.join(entry.get('scopes') or ['effectgate:tools'])}")


@token_app.command("revoke")
def token_revoke(
    label: Annotated[str, typer.Option("--label", help="The token to revoke.")],
    file: TokensFile = Path(DEFAULT_TOKENS),
) -> None:
    """Remove a token: a running surface refuses it from its next request on (the file is read again)."""
    entries = _entries(file)
    if label not in entries:
        err_console.print(f"[red]refused:[/] {file} has no token labelled {label}")
        raise typer.Exit(2)
    del entries[label]
    _write(file, entries)
    err_console.print(f"token {label} revoked")
