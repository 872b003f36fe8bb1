"""Settings of the MCP surface (prefix ``EFFECTGATE_SURFACE_``; ``effectgate mcp serve`` flags set the same)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Self

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from effectgate.contracts.bus.catalog import TOKEN
from effectgate.shared.config.settings import ServiceSettings

__all__ = ["SurfaceSettings"]

ENV_PREFIX = "EFFECTGATE_SURFACE_"


class SurfaceSettings(ServiceSettings):
    """Where the surface listens, who its callers are, and how long it holds a call."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    stdio: bool = Field(default=False, description="Serve one client over stdin/stdout. Env: EFFECTGATE_SURFACE_STDIO.")
    principal: str | None = Field(
        default=None, description="The principal of the stdio client. Env: EFFECTGATE_SURFACE_PRINCIPAL."
    )
    host: str = Field(default="127.0.0.1", description="HTTP listen address. Env: EFFECTGATE_SURFACE_HOST.")
    port: int = Field(default=8765, ge=0, le=65535, description="HTTP port. Env: EFFECTGATE_SURFACE_PORT.")
    socket_fd: int | None = Field(
        default=None,
        ge=0,
        description="A listening socket handed down by the process that started the surface, served instead of "
        "binding host:port (port then only names it in URLs). Env: EFFECTGATE_SURFACE_SOCKET_FD.",
    )
    path: str = Field(default="/mcp", pattern=r"^/[A-Za-z0-9/_-]*$", description="MCP endpoint path.")
    credentials_dir: Path | None = Field(
        default=None,
        description="The stack's credentials directory (agent-<p>.json, mcp-surface.json); unset: an open bus. "
        "Env: EFFECTGATE_SURFACE_CREDENTIALS_DIR.",
    )
    public_keys_dir: Path | None = Field(
        default=None,
        description="The gateway's public keys (receipts are verified); default $EFFECTGATE_PUBLIC_KEYS_DIR. "
        "Env: EFFECTGATE_SURFACE_PUBLIC_KEYS_DIR.",
    )
    tokens_file: Path | None = Field(default=None, description="Static bearer tokens (TOML). Env: …_TOKENS_FILE.")
    oauth_jwks: str | None = Field(default=None, description="The authorization server's JWKS URL or file.")
    oauth_issuer: str | None = Field(default=None, description="Required token issuer (iss).")
    oauth_principal_claim: str = Field(default="sub", description="The JWT claim naming the principal.")
    resource_url: str | None = Field(
        default=None, description="This surface's canonical URL: the tokens' required audience (RFC 8707)."
    )
    required_scope: str = Field(default="effectgate:tools", description="Scope every token must hold (else 403).")
    open_principal: str | None = Field(
        default=None, description="No authentication: every request acts as this principal (loopback only)."
    )
    flat_tools: list[str] = Field(default=[], description="Tools whose operations keep their own MCP names.")
    hold_s: float = Field(default=20.0, gt=0, le=3600, description="Longest hold of a call before 'pending', s.")
    progress_s: float = Field(default=5.0, gt=0, le=60, description="Seconds between progress notifications.")
    grace_s: float = Field(
        default=600.0, ge=0, description="Seconds an outcome that may have had an effect is returned to re-sends."
    )
    result_limit_bytes: int = Field(default=262_144, ge=1024, description="Largest result returned whole, bytes.")
    request_limit_bytes: int = Field(default=1_048_576, ge=1024, description="Largest HTTP request body, bytes.")

    @model_validator(mode="after")
    def _one_identity(self) -> Self:
        modes = [self.stdio, self.tokens_file is not None, self.oauth_jwks is not None, self.open_principal is not None]
        if sum(modes) != 1:
            raise ValueError("choose exactly one of: stdio with principal, tokens_file, oauth_jwks, open_principal")
        fixed = self.principal if self.stdio else self.open_principal
        if (self.stdio or self.open_principal) and not (fixed and TOKEN.match(fixed)):
            raise ValueError(f"the principal must match {TOKEN.pattern}")
        if self.oauth_jwks and not (self.oauth_issuer and self.resource_url):
            raise ValueError("oauth_jwks needs oauth_issuer and resource_url")
        if self.open_principal and not _loopback(self.host):
            raise ValueError(f"open_principal (no authentication) listens on loopback only, not {self.host}")
        return self

    @property
    def fixed_principal(self) -> str | None:
        """The one principal of a stdio or open surface; ``None`` when tokens name it."""
        return self.principal if self.stdio else self.open_principal


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
