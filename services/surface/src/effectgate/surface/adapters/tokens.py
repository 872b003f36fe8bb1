"""Bearer tokens to principals: a static token file, or OAuth 2.1 access tokens (JWT) from an authorization server.

Either verifier implements the MCP SDK's ``TokenVerifier``: the SDK's middleware answers a
missing or invalid token ``401`` with the ``WWW-Authenticate`` challenge and a missing scope
``403 insufficient_scope`` (MCP 2025-11-25, Authorization; RFC 6750 §3). The principal is the
token's, never the request's: :attr:`AccessToken.client_id` carries it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import tomllib
from pathlib import Path
from typing import Any

import jwt
import msgspec
from mcp.server.auth.provider import AccessToken

from effectgate.contracts.bus.catalog import TOKEN

__all__ = ["JwtTokens", "StaticTokens", "TokensInvalid", "token_digest"]

DEFAULT_SCOPE = "effectgate:tools"
log = logging.getLogger("effectgate.surface.tokens")
_ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "EdDSA"]


class TokensInvalid(ValueError):
    """The token file or the OAuth settings cannot be used (the message names the entry)."""


class _Entry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    principal: str
    sha256: str
    scopes: list[str] | None = None


def token_digest(token: str) -> str:
    """SHA-256 of the token's UTF-8 bytes, hex: what the token file stores."""
    return hashlib.sha256(token.encode()).hexdigest()


class StaticTokens:
    """Tokens from a static file (module docstring), read again when the file changes.

    The file's inode, size, modification and change times are checked on every request (one ``stat``);
    a changed file is read again, so ``effectgate mcp token add`` and a deleted entry take effect without a restart.
    A file that can no longer be read or parsed accepts no token at all until it is fixed
    (fail closed: a half-edited file never keeps a revoked token valid), and says why in the log.

    Raises:
        TokensInvalid: at construction, a malformed file or entry (an unknown key, a principal
            that is not one subject token, a digest that is not 64 hex characters, a digest twice).
    """

    def __init__(self, path: Path, resource: str | None) -> None:
        self._path, self._resource = path, resource
        self._by_digest = _load(path)
        self._seen = _stamp(path)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The principal of ``token``, or ``None`` when the file does not hold it."""
        self._reload()
        digest = token_digest(token)
        found = self._by_digest.get(digest)
        if found is None:
            log.warning("bearer token refused: not in %s (sha256 %s…)", self._path, digest[:12])
            return None
        principal, scopes = found
        return AccessToken(token="static", client_id=principal, scopes=scopes, resource=self._resource)

    def _reload(self) -> None:
        stamp = _stamp(self._path)
        if stamp == self._seen:
            return
        self._seen = stamp
        try:
            self._by_digest = _load(self._path)
        except TokensInvalid as error:
            log.error("token file unusable, every token refused until it is fixed: %s", error)
            self._by_digest = {}


def _stamp(path: Path) -> tuple[int, ...] | None:
    """What changes with the file: its inode (a replaced file), size, and modification and change times.

    The change time cannot be set back (``cp -p`` and ``rsync -a`` restore only the modification time).
    """
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns


def _load(path: Path) -> dict[str, tuple[str, list[str]]]:
    by_digest: dict[str, tuple[str, list[str]]] = {}
    for label, raw in _tables(path).items():
        entry = _entry(label, raw)
        if entry.sha256 in by_digest:
            raise TokensInvalid(f"{path}: [tokens.{label}] repeats another entry's token")
        by_digest[entry.sha256] = (entry.principal, entry.scopes or [DEFAULT_SCOPE])
    return by_digest


def _tables(path: Path) -> dict[str, Any]:
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise TokensInvalid(f"{path}: {error}") from None
    unknown = set(document) - {"tokens"}
    if unknown or not isinstance(document.get("tokens", {}), dict):
        raise TokensInvalid(f"{path}: only [tokens.<label>] tables are allowed (found {sorted(unknown)})")
    return dict(document.get("tokens", {}))


def _entry(label: str, raw: Any) -> _Entry:
    try:
        entry = msgspec.convert(raw, _Entry)
    except msgspec.ValidationError as error:
        raise TokensInvalid(f"[tokens.{label}]: {error}") from None
    if not TOKEN.match(entry.principal):
        raise TokensInvalid(f"[tokens.{label}]: principal must match {TOKEN.pattern}")
    if len(entry.sha256) != 64 or any(c not in "0123456789abcdef" for c in entry.sha256):
        raise TokensInvalid(f"[tokens.{label}]: sha256 must be 64 lower-case hex characters")
    return entry


class JwtTokens:
    """OAuth 2.1 access tokens as JWTs (module docstring).

    Args:
        jwks: the authorization server's JWKS: an ``https://`` / ``http://`` URL (fetched and
            cached by PyJWT's ``PyJWKClient``) or a file holding the JWKS JSON.
        issuer: the required ``iss``.
        resource: the required audience: this surface's canonical URL.
        principal_claim: the claim that names the principal.
        leeway_s: clock skew allowed on ``exp`` / ``nbf``, seconds.
    """

    def __init__(self, jwks: str, issuer: str, resource: str, principal_claim: str = "sub", leeway_s: float = 30.0):
        self._issuer, self._resource, self._claim, self._leeway = issuer, resource, principal_claim, leeway_s
        self._client = jwt.PyJWKClient(jwks) if jwks.startswith(("https://", "http://")) else None
        self._keys = None if self._client else _jwks_file(Path(jwks))

    async def verify_token(self, token: str) -> AccessToken | None:
        """The principal and scopes of a valid token, or ``None`` (any failure: invalid)."""
        try:
            key = await self._key(token)
            claims = jwt.decode(
                token,
                key,
                algorithms=_ALGORITHMS,
                audience=self._resource,
                issuer=self._issuer,
                leeway=self._leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except (jwt.PyJWTError, KeyError, ValueError) as error:
            log.warning("bearer token refused: %s", str(error) or type(error).__name__)
            return None
        access = _access(claims, self._claim, self._resource)
        if access is None:
            log.warning("bearer token refused: claim %r names no principal", self._claim)
        return access

    async def _key(self, token: str) -> Any:
        if self._client is not None:
            return (await asyncio.to_thread(self._client.get_signing_key_from_jwt, token)).key
        assert self._keys is not None
        kid = jwt.get_unverified_header(token).get("kid")
        keys = [key for key in self._keys.keys if kid is None or key.key_id == kid]
        if not keys:
            raise KeyError(f"no key {kid!r} in the JWKS")
        return keys[0].key


def _jwks_file(path: Path) -> jwt.PyJWKSet:
    try:
        return jwt.PyJWKSet.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, jwt.PyJWTError) as error:
        raise TokensInvalid(f"{path}: not a JWKS ({error})") from None


def _access(claims: dict[str, Any], claim: str, resource: str) -> AccessToken | None:
    principal = claims.get(claim)
    if not isinstance(principal, str) or not TOKEN.match(principal):
        return None
    scope = claims.get("scope", claims.get("scp", ""))
    if isinstance(scope, str):
        scopes = scope.split()
    else:  # RFC 9068 §2.2.3: a space-separated string; some servers send a list; anything else holds no scope
        scopes = [item for item in scope if isinstance(item, str)] if isinstance(scope, list) else []
    expires = claims.get("exp")
    return AccessToken(
        token="jwt",
        client_id=principal,
        scopes=scopes,
        expires_at=int(expires) if isinstance(expires, int | float) else None,
        resource=resource,
        subject=str(claims.get("sub")) if claims.get("sub") is not None else None,
        claims={"iss": claims.get("iss")},
    )
