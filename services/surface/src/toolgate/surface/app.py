"""The composition root of the MCP surface: settings in, a served MCP endpoint out.

Stateless by design: the only state that outlives a request is in NATS (the calls ledger,
the stream of requests and receipts), so any replica serves any request and legacy HTTP
clients get no session id (the SDK's ``stateless_http``); 2026-07-28 requests are stateless
by the protocol. The SDK's Streamable HTTP app serves both revisions on one endpoint.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

import nats
import uvicorn
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from nats.aio.client import Client
from pydantic import AnyHttpUrl
from starlette.applications import Starlette

from toolgate.contracts import catalog
from toolgate.contracts.nats_credentials import credentials_file, load_credentials
from toolgate.contracts.nats_permissions import MCP_SURFACE
from toolgate.shared.connections import tls_options, warn_if_open
from toolgate.surface.adapters.agents import Agents
from toolgate.surface.adapters.cancel_relay import CancelRelay
from toolgate.surface.adapters.changes import Changes
from toolgate.surface.adapters.client_ids import ClientIds
from toolgate.surface.adapters.ledger import Ledger
from toolgate.surface.adapters.tokens import JwtTokens, StaticTokens
from toolgate.surface.cancels import Cancels
from toolgate.surface.gateway import Gateway, Waiting
from toolgate.surface.handlers import build_server
from toolgate.surface.listings import Listings
from toolgate.surface.notices import Notices
from toolgate.surface.settings import SurfaceSettings

__all__ = ["Surface", "http_app", "running", "serve"]

log = logging.getLogger("toolgate.surface")


@dataclass
class Surface:
    """A running surface: the MCP server and what it holds open."""

    server: Server[Any]
    nc: Client
    agents: Agents


@contextlib.asynccontextmanager
async def running(settings: SurfaceSettings) -> AsyncIterator[Surface]:
    """Connect to the bus, bind the ledger, follow changes; close everything on exit.

    Raises:
        nats.errors.Error / OSError: the bus cannot be reached or the ledger bucket is missing.
    """
    tls = tls_options(settings.nats_ca_file)
    nc = await nats.connect(settings.nats_url, **_own_credentials(settings), **tls)
    warn_if_open(nc, log)
    agents = Agents(settings.nats_url, settings.credentials_dir, settings.public_keys_dir, **tls)
    try:
        kv = await nc.jetstream().key_value(catalog.MCP_CALLS_BUCKET)
        listings, notices = Listings(agents, frozenset(settings.flat_tools)), Notices()
        gateway = Gateway(agents, listings, Ledger(kv), _waiting(settings))
        await Changes(nc, lambda: _notify(listings, notices)).start()
        relay = CancelRelay(nc, Cancels())
        await relay.start()
        server = build_server(gateway, notices, relay, settings.fixed_principal, version("toolgate-surface"))
        yield Surface(server, nc, agents)
    finally:
        await agents.aclose()
        await nc.close()


async def _notify(listings: Listings, notices: Notices) -> None:
    for principal in await listings.refresh():
        await notices.tools_changed(principal)


def _own_credentials(settings: SurfaceSettings) -> dict[str, Any]:
    if settings.credentials_dir is None:
        return {}
    return load_credentials(credentials_file(settings.credentials_dir, MCP_SURFACE))


def _waiting(settings: SurfaceSettings) -> Waiting:
    return Waiting(settings.hold_s, settings.progress_s, settings.grace_s, settings.result_limit_bytes)


def http_app(server: Server[Any], settings: SurfaceSettings) -> Starlette:
    """The Streamable HTTP app (both protocol revisions), behind the configured authentication.

    Legacy clients get a stateless client id (:mod:`toolgate.surface.adapters.client_ids`).
    """
    verifier, auth = _auth(settings)
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
    app.add_middleware(ClientIds)
    return app


def _auth(settings: SurfaceSettings) -> tuple[TokenVerifier | None, AuthSettings | None]:
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


async def serve(settings: SurfaceSettings) -> None:
    """Serve until stopped: one stdio client, or HTTP on ``host:port``."""
    async with running(settings) as surface:
        if settings.stdio:
            async with stdio_server() as (read, write):
                await surface.server.run(read, write, surface.server.create_initialization_options())
            return
        app = http_app(surface.server, settings)
        config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning", lifespan="on")
        await uvicorn.Server(config).serve()
