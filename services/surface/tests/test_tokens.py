"""Bearer tokens to principals: the static file and OAuth 2.1 JWT access tokens."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from effectgate.surface.adapters.tokens import JwtTokens, StaticTokens, TokensInvalid, token_digest

RESOURCE = "https://gate.example/mcp"
ISSUER = "https://login.example"


def write_tokens(path: Path, *entries: tuple[str, str, str]) -> Path:
    text = "".join(f'[tokens.{label}]\nprincipal = "{p}"\nsha256 = "{token_digest(t)}"\n' for label, p, t in entries)
    path.write_text(text)
    return path


async def test_a_listed_token_acts_as_its_principal_and_nothing_else_does(tmp_path: Path) -> None:
    tokens = StaticTokens(write_tokens(tmp_path / "t.toml", ("a", "alice-agent", "secret-1")), RESOURCE)
    found = await tokens.verify_token("secret-1")
    assert found is not None and found.client_id == "alice-agent" and found.scopes == ["effectgate:tools"]
    assert found.token != "secret-1"  # the token itself is not kept
    assert await tokens.verify_token("secret-2") is None
    assert await tokens.verify_token("") is None


async def test_the_file_is_read_again_when_it_changes_and_a_broken_file_accepts_nothing(tmp_path: Path) -> None:
    path = write_tokens(tmp_path / "t.toml", ("a", "p1", "one"))
    tokens = StaticTokens(path, None)
    write_tokens(path, ("a", "p1", "one"), ("b", "p2", "two-longer"))
    assert (await tokens.verify_token("two-longer")) is not None
    path.write_text("[tokens.a\nbroken")
    assert await tokens.verify_token("one") is None


@pytest.mark.parametrize(
    "text",
    [
        '[tokens.a]\nprincipal = "p"\nsha256 = "abc"\n',
        '[tokens.a]\nprincipal = "no spaces"\nsha256 = "' + "a" * 64 + '"\n',
        '[tokens.a]\nprincipal = "p"\nsha256 = "' + "a" * 64 + '"\nadmin = true\n',
        "[other]\nx = 1\n",
        '[tokens.a]\nprincipal = "p"\nsha256 = "'
        + "a" * 64
        + '"\n[tokens.b]\nprincipal = "q"\nsha256 = "'
        + "a" * 64
        + '"\n',
        "not toml = = =",
    ],
)
def test_a_malformed_file_is_refused_at_start_naming_the_entry(tmp_path: Path, text: str) -> None:
    (tmp_path / "t.toml").write_text(text)
    with pytest.raises(TokensInvalid):
        StaticTokens(tmp_path / "t.toml", None)


@pytest.fixture
def signer(tmp_path: Path) -> tuple[Any, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "ES256"}]}))
    return key, tmp_path / "jwks.json"


def issue(key: Any, **claims: Any) -> str:
    body = {"iss": ISSUER, "aud": RESOURCE, "sub": "agent-7", "exp": time.time() + 300, "scope": "effectgate:tools"}
    return jwt.encode({**body, **claims}, key, algorithm="ES256", headers={"kid": "k1"})


async def test_a_valid_access_token_names_its_principal_and_scopes(signer: tuple[Any, Path]) -> None:
    key, jwks = signer
    found = await JwtTokens(str(jwks), ISSUER, RESOURCE).verify_token(issue(key, scope="effectgate:tools other"))
    assert found is not None and found.client_id == "agent-7" and found.scopes == ["effectgate:tools", "other"]
    assert found.resource == RESOURCE


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "https://other.example/mcp"},  # issued for another resource: never accepted here
        {"iss": "https://evil.example"},
        {"exp": time.time() - 3600},
        {"sub": "two words"},  # not a principal name
        {"sub": None},
    ],
)
async def test_a_token_for_another_audience_issuer_or_time_is_refused(signer: tuple[Any, Path], claims: dict) -> None:  # type: ignore[type-arg]
    key, jwks = signer
    assert await JwtTokens(str(jwks), ISSUER, RESOURCE).verify_token(issue(key, **claims)) is None


async def test_a_token_signed_by_another_key_or_none_is_refused(signer: tuple[Any, Path]) -> None:
    _, jwks = signer
    other = ec.generate_private_key(ec.SECP256R1())
    verifier = JwtTokens(str(jwks), ISSUER, RESOURCE)
    assert await verifier.verify_token(issue(other)) is None
    unsigned = jwt.encode({"iss": ISSUER, "aud": RESOURCE, "sub": "x", "exp": time.time() + 60}, None, algorithm="none")
    assert await verifier.verify_token(unsigned) is None
    assert await verifier.verify_token("not.a.jwt") is None
