"""The composition root of the MCP surface: settings in, a served MCP endpoint out.

Stateless by design: the only state that outlives a request is in NATS (the calls ledger,
the stream of requests and receipts), so any replica serves any request and legacy HTTP
clients get no session id (the SDK's ``stateless_http``); 2026-07-28 requests are stateless
by the protocol. The SDK's Streamable HTTP app serves both revisions on one endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from importlib.metadata import version
from typing import Any

import nats
import nats.errors
import uvicorn
from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from nats.aio.client import Client
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.routing import Route

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.nats_accounts import js_api_of
from effectgate.contracts.bus.nats_credentials import (
    CredentialsInvalid,
    NatsUrlInvalid,
    credentials_file,
    load_credentials,
)
from effectgate.contracts.bus.nats_permissions import MCP_SURFACE
from effectgate.sdk.connecting import connect_quietly
from effectgate.sdk.errors import BusUnreachable
from effectgate.shared.runtime.connections import redact, tls_options, warn_if_open
from effectgate.shared.runtime.nats_options import client_options, servers_and_auth
from effectgate.shared.runtime.nats_watch import ConnectionLost, ConnectionWatch, until_lost
from effectgate.shared.stores.binding import bound
from effectgate.surface.adapters.agents import Agents
from effectgate.surface.adapters.cancel_relay import CancelRelay
from effectgate.surface.adapters.change_stream import ChangeStream
from effectgate.surface.adapters.changes import Changes
from effectgate.surface.adapters.client_ids import ClientIds
from effectgate.surface.adapters.envelopes import Envelopes
from effectgate.surface.adapters.health_routes import add_probes
from effectgate.surface.adapters.ledger import Ledger
from effectgate.surface.adapters.stdio_refusals import CheckedStdin, answering_garbage
from effectgate.surface.adapters.tokens import JwtTokens, StaticTokens, TokensInvalid
from effectgate.surface.cancels import Cancels
from effectgate.surface.errors import NotServed
from effectgate.surface.gateway import Gateway
from effectgate.surface.handlers import build_server
from effectgate.surface.holding import Waiting
from effectgate.surface.listings import Listings
from effectgate.surface.notices import Notices
from effectgate.surface.settings import SurfaceSettings

__all__ = ["Surface", "http_app", "run", "running", "serve", "token_checks"]

log = logging.getLogger("effectgate.surface")


@dataclass
class Surface:
    """A running surface: the MCP server and what it holds open."""

    server: Server[Any]
    nc: Client
    agents: Agents
    notices: Notices
    watch: ConnectionWatch


@contextlib.asynccontextmanager
async def running(settings: SurfaceSettings) -> AsyncIterator[Surface]:
    """Connect to the bus, bind the ledger, follow changes; close everything on exit.

    Raises:
        nats.errors.Error / OSError: the bus cannot be reached or the ledger bucket is missing.
    """
    tls, watch = tls_options(settings.nats_ca_file), ConnectionWatch("the MCP surface", settings.nats_refused_exit_s)
    reconnect = {"max_reconnect_attempts": -1, "reconnect_time_wait": 1.0, "connect_timeout": 2.0}
    own = _own_credentials(settings)
    nc = await connect_quietly(settings.nats_url, _reporting(watch), **_followed(watch), **own, **tls, **reconnect)
    watch.follow(nc)
    warn_if_open(nc, log)
    agents = Agents(settings.nats_url, settings.credentials_dir, settings.public_keys_dir, **tls)
    try:
        js = nc.jetstream(prefix=js_api_of(own.get("user")))  # its account imports the calls bucket's API
        kv = await bound(f"bucket {catalog.MCP_CALLS_BUCKET}", partial(js.key_value, catalog.MCP_CALLS_BUCKET))
        listings, notices = Listings(agents, frozenset(settings.flat_tools)), Notices()
        gateway = Gateway(agents, listings, Ledger(kv), _waiting(settings))
        await Changes(nc, lambda: _notify(listings, notices)).start()
        relay = CancelRelay(nc, Cancels())
        await relay.start()
        server = build_server(gateway, notices, relay, settings.fixed_principal, version("effectgate-surface"))
        yield Surface(server, nc, agents, notices, watch)
    finally:
        watch.stopping()
        await agents.aclose()
        await nc.close()


async def _lost(error: Exception) -> None:
    log.warning("NATS connection: %s", redact(str(error) or type(error).__name__))


def _reporting(watch: ConnectionWatch) -> Callable[[Exception], Awaitable[None]]:
    async def on_error(error: Exception) -> None:
        await watch.on_error(error)
        await _lost(error)

    return on_error


def _followed(watch: ConnectionWatch) -> dict[str, Any]:
    """nats-py's connection callbacks, told to ``watch`` (a lost connection ends the surface, exit code 1)."""
    return {
        "disconnected_cb": watch.on_disconnected,
        "reconnected_cb": watch.on_reconnected,
        "closed_cb": watch.on_closed,
    }


async def _notify(listings: Listings, notices: Notices) -> None:
    for principal in await listings.refresh():
        await notices.tools_changed(principal)


def _own_credentials(settings: SurfaceSettings) -> dict[str, Any]:
    """Its credentials file in the stack's credentials directory, else the ``EFFECTGATE_NATS_*`` options (if any)."""
    if settings.credentials_dir is None:
        return client_options(servers_and_auth(settings)[1])
    return load_credentials(credentials_file(settings.credentials_dir, MCP_SURFACE))


def _waiting(settings: SurfaceSettings) -> Waiting:
    return Waiting(settings.hold_s, settings.progress_s, settings.grace_s, settings.result_limit_bytes)


def http_app(
    server: Server[Any],
    notices: Notices,
    settings: SurfaceSettings,
    checks: tuple[TokenVerifier | None, AuthSettings | None],
    watch: ConnectionWatch | None = None,
) -> Starlette:
    """The Streamable HTTP app (both protocol revisions), behind the configured authentication.

    With a ``watch``, ``/livez`` and ``/readyz`` are served too (:mod:`effectgate.surface.adapters.health_routes`).

    Legacy clients get a stateless client id (:mod:`effectgate.surface.adapters.client_ids`) and
    their GET stream of changes (:mod:`effectgate.surface.adapters.change_stream`); a request whose
    id JSON-RPC does not allow is refused (:mod:`effectgate.surface.adapters.envelopes`).
    """
    verifier, auth = checks
    if settings.open_principal:
        log.warning("INSECURE: no authentication: every request acts as principal %s", settings.open_principal)
    app = server.streamable_http_app(
        streamable_http_path=settings.path,
        stateless_http=True,
        host=settings.host,
        max_request_body_size=settings.request_limit_bytes,
        auth=auth,
        token_verifier=verifier,
    )
    route = next(r for r in app.routes if isinstance(r, Route) and r.path == settings.path)
    inner = route.app

    def guarded(sdk: Any) -> Any:
        envelopes = Envelopes(sdk, settings.request_limit_bytes)
        return ChangeStream(envelopes, notices, settings.fixed_principal, verifier)

    if isinstance(inner, RequireAuthMiddleware):  # served only behind the SDK's token checks
        inner.app = guarded(inner.app)
    else:
        route.app = guarded(inner)
    app.add_middleware(ClientIds)
    if watch is not None:
        add_probes(app, watch)
    return app


def token_checks(settings: SurfaceSettings) -> tuple[TokenVerifier | None, AuthSettings | None]:
    """The token verifier and the SDK's auth settings of an HTTP surface (``None, None``: stdio or open).

    Raises:
        TokensInvalid: the token file or the JWKS cannot be used.
    """
    own = f"http://{settings.host}:{settings.port}{settings.path}"
    if settings.tokens_file is not None:
        auth = AuthSettings(
            issuer_url=AnyHttpUrl(own), resource_server_url=None, required_scopes=[settings.required_scope]
        )
        return StaticTokens(settings.tokens_file, settings.resource_url), auth
    if settings.oauth_jwks is not None:
        assert settings.oauth_issuer and settings.resource_url
        verifier: TokenVerifier = JwtTokens(
            settings.oauth_jwks, settings.oauth_issuer, settings.resource_url, settings.oauth_principal_claim
        )
        auth = AuthSettings.model_validate(  # strings: the issuer is compared exactly (RFC 8414 §3.3)
            {
                "issuer_url": settings.oauth_issuer,
                "resource_server_url": settings.resource_url,
                "validate_token_resource": True,
                "required_scopes": [settings.required_scope],
            }
        )
        return verifier, auth
    return None, None


def run(settings: SurfaceSettings) -> int:
    """Serve until stopped; a start that cannot work is one clear log line and exit code 2.

    Returns:
        0 when stopped, 1 when its NATS connection was lost for good (closed, or refused on
        every server for ``nats_refused_exit_s``), 2 when it could not start (the log names why: the token file, the
        credentials, the NATS settings, the bus or the ledger bucket).
    """
    try:
        asyncio.run(serve(settings))
    except KeyboardInterrupt:
        return 0
    except ConnectionLost as error:
        log.critical("%s", error)
        return 1
    except (
        TokensInvalid,
        CredentialsInvalid,
        NatsUrlInvalid,
        NotServed,
        BusUnreachable,
        PermissionError,
        nats.errors.Error,
        OSError,
    ) as error:
        log.error("the MCP surface cannot start: %s", redact(str(error) or type(error).__name__))
        return 2
    return 0


async def serve(settings: SurfaceSettings) -> None:
    """Serve until stopped: one stdio client, or HTTP on ``host:port``.

    Raises:
        TokensInvalid: the token file cannot be used.
        CredentialsInvalid: a credentials file cannot be used.
        NotServed: the stdio or open principal has no credentials file here.
        nats.errors.Error / OSError: the bus or the ledger bucket cannot be reached.
        ConnectionLost: the NATS connection was lost for good while serving.
    """
    checks = token_checks(settings)  # a bad token file is refused before anything connects
    async with running(settings) as surface:
        await until_lost(surface.watch, _served(surface, settings, checks))


async def _served(
    surface: Surface, settings: SurfaceSettings, checks: tuple[TokenVerifier | None, AuthSettings | None]
) -> None:
    """Serve one stdio client, or HTTP on ``host:port``, until stopped."""
    if settings.fixed_principal is not None:
        surface.agents.check(settings.fixed_principal)
    if settings.stdio:
        stdin = CheckedStdin()
        async with stdio_server(stdin=stdin) as (read, write), answering_garbage(read, write) as checked:  # type: ignore[arg-type]
            stdin.attach(write)
            await surface.server.run(checked, write, surface.server.create_initialization_options())
        return
    app = http_app(surface.server, surface.notices, settings, checks, surface.watch)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning", lifespan="on")
    log.info("MCP surface on http://%s:%d%s", settings.host, settings.port, settings.path)
    inherited = [socket.socket(fileno=settings.socket_fd)] if settings.socket_fd is not None else None
    await uvicorn.Server(config).serve(sockets=inherited)
