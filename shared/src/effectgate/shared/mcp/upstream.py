"""An MCP server's Streamable HTTP upstream: what its ``url`` and ``headers_env`` may be, how its URL is printed.

Credentials go in headers whose values are read from the environment when a connection
starts (:func:`header_values`), never in the URL: a URL with a user or password is refused,
and wherever effectgate prints an upstream's URL its query values are masked (:func:`masked_url`).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from effectgate.shared.mcp.servers import McpServerConfig

__all__ = ["ENV_NAME", "HEADER_NAME", "check_upstream", "header_values", "masked_url"]

HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}\Z")
"""What an HTTP header name may be (RFC 9110 token)."""

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
"""What an environment variable named by ``headers_env`` may be."""


def check_upstream(url: str, headers_env: Mapping[str, str]) -> None:
    """Refuse a URL that is not ``http(s)://`` with a host or carries credentials, or a bad header entry.

    Raises:
        ValueError: naming ``url`` (shown masked) or the ``headers_env`` entry.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"url: expected an http:// or https:// URL with a host, got {masked_url(url)[:200]!r}")
    if parts.username or parts.password:
        raise ValueError("url: must not carry credentials; send them in a header named by headers_env")
    for header, variable in headers_env.items():
        if not HEADER_NAME.match(header):
            raise ValueError(f"headers_env: {header[:64]!r} is not an HTTP header name")
        if not ENV_NAME.match(variable):
            raise ValueError(f"headers_env.{header}: {variable[:128]!r} is not an environment variable name")


def masked_url(url: str) -> str:
    """``url`` as it may be printed: each query value, and a fragment, replaced by ``***``.

    ``https://api.example/mcp?api_key=S3cret&v=2`` → ``https://api.example/mcp?api_key=***&v=***``;
    a query part without ``=`` is masked whole. Never raises, whatever ``url`` holds.
    """
    rest, hash_, fragment = url.partition("#")
    base, question, query = rest.partition("?")
    masked = "&".join(_masked_pair(pair) for pair in query.split("&")) if question else ""
    return f"{base}{question}{masked}{hash_}{'***' if fragment else ''}"


def _masked_pair(pair: str) -> str:
    """``key=***`` for ``key=value``, ``***`` for a bare value, an empty part as it is."""
    key, equals, value = pair.partition("=")
    if not equals:
        return "***" if key else ""
    return f"{key}=***" if value else f"{key}="


def header_values(config: McpServerConfig, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headers an HTTP upstream is sent: each ``headers_env`` entry's value, read from ``environ``.

    Args:
        config: the server.
        environ: where to read (default ``os.environ``).

    Returns:
        Header name to value (``{}`` for a stdio server).

    Raises:
        ValueError: an environment variable is unset or empty (the message names it, never a value).
    """
    source = os.environ if environ is None else environ
    values = {header: source.get(variable, "") for header, variable in config.headers_env.items()}
    missing = [config.headers_env[header] for header, value in values.items() if not value]
    if missing:
        raise ValueError(f"MCP server {config.name!r}: environment variable {missing[0]} (headers_env) is not set")
    return values
