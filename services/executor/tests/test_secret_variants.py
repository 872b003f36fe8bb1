"""The secret corpora as kinds: generated variants that must come back byte-identical, and that must vanish.

Look-alikes: every secret keyword (``password``, ``token``, ``secret``, ``api key``,
``credential``, …) as a word of prose — in sentence templates, in three casings, followed
by ordinary words (some with digits) and punctuation — as the value of a JSON member, in a
JSON text, in member names, and in the path, query and fragment of a link a tool returns to
its user. Secrets: every keyword spelling in every assignment syntax with credential-shaped
values, in sentences, JSON texts and results; token-shaped values after a keyword in prose;
connection strings; ``Authorization`` headers; known token formats and private keys inside
links. Each variant goes through the executor's real :class:`Redactor`.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Iterator

import pytest

from effectgate.shared.secrets.detectors import find_secrets
from effectgate.shared.secrets.redaction import Redactor

REDACTOR = Redactor(find_secrets)

PROSE_KEYWORDS = [
    *("password", "passwd", "pwd", "passphrase", "secret", "token", "api key", "api_key", "apikey", "API-Key"),
    *("access key", "access_key", "secret key", "secret_key", "private key", "credential", "credentials"),
    *("auth token", "access token", "client secret", "contraseña"),
]
WORDS = [
    *("bucket", "updated", "reset", "rotation", "expired", "manager", "policy", "required", "successfully"),
    *("bucket-based", "refresh", "holder", "sauce", "store", "limits", "changed", "strength", "hygiene"),
]
WORDS_WITH_DIGITS = [
    *("v2", "2024", "5", "10x", "gpt-4o-mini", "AES-256-GCM", "OAuth2", "sha256", "x86_64", "HS256", "2FA"),
    *("utf-8", "2024-01-05T10:00:00Z", "1.5.0", "3rd", "ISO-8601", "RFC6749", "e2e-tests"),
]
PUNCTUATION = ["", ".", "!", "?", ":", ",", ";", "…", ")", "'s", '"', "..."]
PROSE = [
    "{Kw} {word}{p}",
    "We use a {kw} {word}{p}",
    "Rate limiting uses a {kw} {word}{p} 5 calls refill per minute.",
    "The {kw} {word}{p} see the docs for details.",
    "{Kw}: {word} {word}.",
    "Your {kw} was {word}{p} please try again in 10 minutes.",
    "({kw} {word}{p})",
    '"{kw} {word}{p}" said the log.',
    "- {Kw} {word}{p}\n- next item",
    "{kw}={word}{p}",
    "Step 3 of 5: choose a {kw} {word}{p} then confirm.",
    "{KW} {WORD}{p}",
]
CASINGS = [str.lower, str.capitalize, str.upper]


def _sentences(keyword: str) -> Iterator[str]:
    """Each prose template with ``keyword`` in three casings, each following word, punctuation cycled."""
    words = itertools.cycle(PUNCTUATION)
    for template, casing, word in itertools.product(PROSE, CASINGS, WORDS + WORDS_WITH_DIGITS):
        kw = casing(keyword)
        if ("=" in template or "{Kw}:" in template) and word in WORDS_WITH_DIGITS:
            continue  # a value with digits explicitly assigned is credential-like: see the secrets below
        fields = {"kw": kw, "Kw": kw[:1].upper() + kw[1:], "KW": kw.upper(), "word": word, "WORD": word.upper()}
        yield template.format(p=next(words), **fields)


def _changed(texts: Iterator[str]) -> list[str]:
    """The texts the redactor changes, alone, inside a result and inside a JSON text."""
    changed = []
    for text in texts:
        as_json, result = json.dumps({"message": text, "ok": True}), {"rows": [{"message": text}]}
        kept = REDACTOR.text(text) == text and REDACTOR.text(as_json) == as_json
        if not kept or REDACTOR.value(result, "") != (result, ()):
            changed.append(text)
    return changed


@pytest.mark.parametrize("keyword", PROSE_KEYWORDS)
def test_a_keyword_in_prose_is_not_a_secret(keyword: str) -> None:
    assert _changed(_sentences(keyword)) == []


SLUGS = ["password", "token", "secret", "api_key", "apikey", "api-key", "access_token", "reset_token", "credential"]
LINK_VALUES = ["?asfbuy3y2cdaqhvei", "asfbuy3y2cdaqhvei", "9f8e7d6c5b4a3f2e1d0c", "Zt7Qp2Lm9Xc4", "hunter22"]
LINKS = [
    "https://example.com/password-reset/{slug}={value}",
    "https://example.com/reset?{slug}={value}",
    "https://example.com/reset?user=7&{slug}={value}&next=/home",
    "https://app.example.com/a/{slug}={value}/confirm",
    "https://example.com/callback#{slug}={value}&state=xyz",
    "HTTP://EXAMPLE.COM/RESET?{slug}={value}",
    "wss://example.com/socket?{slug}={value}",
    "ftp://files.example.com/get;{slug}={value}",
    "example.com/password-reset/{slug}={value}",
    "/account/reset?{slug}={value}",
]
AROUND_LINKS = ["{url}", "Here is your link: {url} .", "Reset it: <{url}>", '<a href="{url}">reset</a>', "[r]({url})"]


def _links(slug: str) -> Iterator[str]:
    for link, value, around, casing in itertools.product(LINKS, LINK_VALUES, AROUND_LINKS, CASINGS):
        yield around.format(url=link.format(slug=casing(slug), value=value))


@pytest.mark.parametrize("slug", SLUGS)
def test_a_link_the_tool_returns_is_not_a_secret_whatever_its_path_or_query_holds(slug: str) -> None:
    assert _changed(_links(slug)) == []


MEMBER_SUFFIXES = ["policy", "type", "count", "expiry", "reset_url", "bucket", "hint", "length", "updated_at", "id"]


@pytest.mark.parametrize("keyword", ["password", "token", "secret", "api_key", "credential", "access_token"])
def test_a_member_named_after_a_keyword_is_kept_with_its_value(keyword: str) -> None:
    for suffix, value in itertools.product(MEMBER_SUFFIXES, ["strict", 12, True, "Password updated.", None]):
        result = {f"{keyword}_{suffix}": value, f"{keyword} {suffix}": value, "message": f"{keyword} {suffix}"}
        assert REDACTOR.value(result, "/result") == (result, ()), result
        assert REDACTOR.text(json.dumps(result)) == json.dumps(result), result


SECRET_KEYS = [
    *("password", "db_password", "DB_PASSWORD", "passwd", "pwd", "passphrase", "secret", "client_secret"),
    *("api_key", "apiKey", "X-Api-Key", "api-key", "access_token", "auth_token", "token", "secret_key"),
    *("aws_secret_access_key", "private_key", "credentials", "access_key"),
]
SECRET_VALUES = ["Zt7Qp2Lm9Xc4", "9f8e7d6c5b4a3f2e1d0c", "S3cure-pw_1", "hunter22x9", "wJalrXUtnFEMI/K7MDENG/bPxRf"]
ASSIGNMENTS = [
    "{k}={v}",
    "{k}: {v}",
    "{k} = {v}",
    "{k}:={v}",
    "{k} => {v}",
    '"{k}": "{v}"',
    "'{k}': '{v}'",
    '{k}="{v}"',
    "--{k} {v}",
    "export {K}={v}",
    "{k}: '{v}'",
]
AROUND_ASSIGNMENTS = ["{pair}", "login failed: {pair} for admin", "{pair}; retrying", "config: {{{pair}}}", "{pair}."]


def _assignments(key: str) -> Iterator[tuple[str, str]]:
    for syntax, value, around in itertools.product(ASSIGNMENTS, SECRET_VALUES, AROUND_ASSIGNMENTS):
        yield around.format(pair=syntax.format(k=key, K=key.upper(), v=value)), value


def _leaked(cases: Iterator[tuple[str, str]]) -> list[str]:
    """The texts whose secret survives, alone or inside a result (or whose pointer is not named)."""
    leaked = []
    for text, secret in cases:
        cleaned, found = REDACTOR.value({"rows": [{"message": text}]}, "/result")
        if secret in REDACTOR.text(text) or secret in json.dumps(cleaned) or found != ("/result/rows/0/message",):
            leaked.append(text)
    return leaked


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_a_credential_assigned_to_a_secret_key_is_redacted_in_every_syntax(key: str) -> None:
    assert _leaked(_assignments(key)) == []


TOKEN_SHAPED = ["Zt7Qp2Lm9Xc4", "9f8e7d6c5b4a3f2e1d0c", "S3cure-pw_1Q", "AKx9bQ2mZr7TLw4v"]


@pytest.mark.parametrize("keyword", ["password", "token", "secret", "passphrase", "credential", "api_key"])
def test_a_token_shaped_value_after_a_keyword_in_prose_is_redacted(keyword: str) -> None:
    templates = ["the {kw} {v} was revoked", "{Kw} {v}", "Use {kw} {v}.", "new {kw} {v}, keep it safe"]
    cases = itertools.product(templates, TOKEN_SHAPED, CASINGS)
    assert _leaked((t.format(kw=c(keyword), Kw=c(keyword).title(), v=v), v) for t, v, c in cases) == []


DSN_VALUES = ["Zt7Qp2Lm9Xc4", "S3cure-pw_1", "Gu3st!pw*x", "hunter22x9"]
CONNECTION_STRINGS = [
    "postgres://admin:{v}@db/x",
    "postgresql+psycopg://app:{v}@10.0.0.5:5432/shop",
    "mysql://app:{v}@10.0.0.5:3306/shop",
    "redis://:{v}@cache:6379/0",
    "rediss://default:{v}@cache.example.com:6380",
    "mongodb+srv://u:{v}@cluster0.example.net/db",
    "amqp://guest:{v}@mq.internal/",
    "https://deploy:{v}@git.example.com/repo.git",
    "mongodb://db.internal/shop?authSource=admin&password={v}",
    "redis://cache:6379/0?password={v}",
    "jdbc:postgresql://db:5432/shop?user=app&password={v}",
    "jdbc:sqlserver://db:1433;databaseName=shop;user=sa;password={v}",
    "Server=db;Database=shop;User Id=sa;Password={v};",
    "host=db dbname=shop user=app password={v}",
]


@pytest.mark.parametrize("dsn", CONNECTION_STRINGS)
def test_the_password_of_a_connection_string_is_redacted(dsn: str) -> None:
    around = ["{d}", "connection failed: {d}", '{{"dsn": "{d}"}}', "could not reach {d}; retrying"]
    assert _leaked((a.format(d=dsn.format(v=v)), v) for a, v in itertools.product(around, DSN_VALUES)) == []


def test_authorization_credentials_are_redacted_in_every_spelling() -> None:
    basic = base64.b64encode(b"user:correct-horse").decode()
    headers = ["Authorization: Bearer {v}", "authorization: bearer {v}", "AUTHORIZATION: BEARER {v}"]
    headers += ["curl -H 'Authorization: Bearer {v}' https://api.example.com", '{{"Authorization": "Bearer {v}"}}']
    cases = [(h.format(v=v), v) for h, v in itertools.product(headers, TOKEN_SHAPED)]
    cases += [(f"Authorization: Basic {basic}", basic), (f"proxy said: authorization: basic {basic}.", basic)]
    assert _leaked(iter(cases)) == []


GHP = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"
KNOWN = {
    "github": GHP,
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "slack": "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp",
    "stripe": "sk_live_4eC39HqLyjWDarjtT1zdp7dcXyz123",
}


@pytest.mark.parametrize("kind", list(KNOWN))
def test_a_known_token_format_is_redacted_even_inside_a_link(kind: str) -> None:
    token = KNOWN[kind]
    links = ["https://api.example.com/x?token={t}", "https://example.com/a/{t}/b", "example.com/reset?key={t}"]
    assert _leaked((link.format(t=token), token) for link in links) == []


def test_a_private_key_block_is_redacted_in_a_json_text_and_a_result() -> None:
    body = "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi\nZ1BtKKcuXqZ2dMfR8hPgLJ0e7"
    blocks = [f"-----BEGIN {k}PRIVATE KEY-----\n{body}\n-----END {k}PRIVATE KEY-----" for k in ("", "RSA ", "EC ")]
    cases = [(text, "MIIEowIBAAKCAQEA") for block in blocks for text in (block, json.dumps({"key": block}))]
    assert _leaked(iter(cases)) == []
