"""The secret detectors on two corpora: credentials that must vanish, and look-alikes that must not change.

These are the written-down members; ``test_secret_variants.py`` generates the kinds.

Every text goes through the executor's real :class:`Redactor` (``detect-secrets`` plugins
plus the executor's own rules), as a whole string and inside a JSON-like result.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid

import pytest

from effectgate.shared.secrets.detectors import find_secrets
from effectgate.shared.secrets.redaction import Redactor

REDACTOR = Redactor(find_secrets)

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi\nZ1BtKKcuXqZ2dMfR8hPgLJ0e7"

TRUE_POSITIVES: list[tuple[str, str, str]] = [
    # (id, text, the secret that must not survive)
    ("dsn-postgres", "connection failed: postgres://admin:hunter2@db/x", "hunter2"),
    ("dsn-mysql", "could not reach mysql://app:S3cure-pw_1@10.0.0.5:3306/shop", "S3cure-pw_1"),
    ("dsn-empty-user", "redis error at redis://:Zq8vT3kWm@cache:6379/0", "Zq8vT3kWm"),
    ("dsn-subdelims", "amqp://guest:Gu3st!pw*x@mq.internal/", "Gu3st!pw*x"),
    ("url-https-userinfo", "GET https://deploy:tk9Qw2Er@git.example.com/repo.git", "tk9Qw2Er"),
    ("token-assignment", "denied, token=ab12CD34ef56GH78 is not valid", "ab12CD34ef56GH78"),
    ("access-token-colon", "refresh failed; access_token: Zt7Qp2Lm9Xc4", "Zt7Qp2Lm9Xc4"),
    ("password-assignment", "login rejected: password=hunter2 for admin", "hunter2"),
    ("two-assignments", "password=abc123XY rejected; secret=Zx81kQp2LmN4 too", "Zx81kQp2LmN4"),
    ("json-api-key-text", 'config was {"api_key": "Zx81kQp2LmN4vB7c", "region": "eu"}', "Zx81kQp2LmN4vB7c"),
    ("json-password-text", 'body: {"password":"hunter22"}', "hunter22"),
    ("python-dict-text", "{'client_secret': 'cS3cr3t-Value9'}", "cS3cr3t-Value9"),
    ("env-aws-secret", "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ("aws-secret-spaced", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE", "bPxRfiCYzEXAMPLE"),
    ("aws-key-id", "the key AKIAIOSFODNN7EXAMPLE is not allowed", "AKIAIOSFODNN7EXAMPLE"),
    ("aws-session-key-id", "assumed ASIAY34FZKBOKMUTVV7A for the session", "ASIAY34FZKBOKMUTVV7A"),
    ("basic-header", "Authorization: Basic dXNlcjpjb3JyZWN0LWhvcnNl", "dXNlcjpjb3JyZWN0LWhvcnNl"),
    ("bearer-opaque", "sent Authorization: Bearer 8f3kQz9LmN2pX7vR1tY6 upstream", "8f3kQz9LmN2pX7vR1tY6"),
    ("bearer-jwt", f"header was 'Authorization: Bearer {JWT}'", JWT.split(".")[2]),
    ("jwt-bare", f"the session cookie is {JWT}; it expires at noon", JWT.split(".")[1]),
    ("github-classic", "cloned with ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8 ok", "A1b2C3d4E5A1b2C3d4E5"),
    ("github-oauth", "gho_" + "Zz9Yy8Xx7W" * 3 + "w6V5u4", "Zz9Yy8Xx7WZz9Yy8Xx7W"),
    ("github-fine-grained", "use github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzAB", "abcdefghijklmnop"),
    ("slack-bot", "posting as xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp", "0987654321-AbCdEfGhIjKlMnOp"),
    ("slack-user", "xoxp-2222222222-3333333333-4444444444-abcdef0123456789", "abcdef0123456789"),
    ("slack-webhook", "hook https://hooks.slack.com/services/T0001/B0002/XyZ123abcDEF456", "XyZ123abcDEF456"),
    ("stripe-live", "charged with sk_live_" + "4eC39HqLyjWDarjtT1zdp7dcXyz123", "Xyz123"),
    ("stripe-restricted", "rk_live_" + "51HqLyjWDarjtT1zdp7dcAbCdEf", "51HqLyjWDarjtT1zdp7dc"),
    ("pem-rsa", f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA"),
    ("pem-pkcs8", f"key: -----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY----- done", "Z1BtKKcuXqZ2"),
    ("pem-ec", f"-----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}\n-----END EC PRIVATE KEY-----", "3Tz2mr7SZiAM"),
    ("pem-openssh", f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----", "Oi\nZ1"),
    ("pem-no-end", f"truncated -----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}", "dMfR8hPgLJ0e7"),
    ("password-flag", "ran mysql --password hunter22 -u root", "hunter22"),
    ("api-key-header", "sent X-Api-Key: Zx81kQp2LmN4vB7c upstream", "Zx81kQp2LmN4vB7c"),
    ("credentials-assignment", "credentials=Zt7Qp2Lm9Xc4 rejected", "Zt7Qp2Lm9Xc4"),
    ("dsn-query-password", "mongodb://db.internal/shop?authSource=admin&password=S3cr3tPw9", "S3cr3tPw9"),
    ("token-in-prose", "the token Xy7pq2zK9AbC was revoked", "Xy7pq2zK9AbC"),
    ("basic-end-of-sentence", "proxy said: authorization: basic dXNlcjpjb3JyZWN0LWhvcnNl.", "dXNlcjpjb3JyZWN0LWhvcnNl"),
]

FALSE_POSITIVES: list[tuple[str, str]] = [
    ("password-prose", "Your new password: please choose one with 12 characters"),
    ("reset-link", "https://example.com/reset?token=9f8e7d6c5b4a"),
    ("reset-link-in-text", "Here is your link: https://example.com/reset?user=7&token=9f8e7d6c5b4a ."),
    ("sklearn", "sk-learn-model-selection-gridsearch"),
    ("token-policy", "token: refresh_on_expiry"),
    ("prose-keys", "The API key and the secret are rotated monthly; tokens expire after an hour."),
    ("prose-password", "Reset your password from the settings page; the secret question is optional."),
    ("basic-prose", "Basic authentication is required for this endpoint."),
    ("bearer-prose", "Bearer tokens expire after one hour."),
    ("max-tokens", "max_tokens: 4096, token_type: bearer"),
    ("password-policy", "password_policy: strict, password_min_length: 12"),
    ("pwd-path", "pwd: /home/runner/work"),
    ("masked", "password: ********"),
    ("templated", "api_key = ${API_KEY}"),
    ("angle-placeholder", "password=<your password>"),
    ("uuid", str(uuid.UUID("3f2504e0-4f89-11d3-9a0c-0305e82c3301"))),
    ("git-sha", "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 (HEAD -> main)"),
    ("sha256", "sha256:" + hashlib.sha256(b"ordinary data").hexdigest()),
    ("base64-data", base64.b64encode(b"hello world, this is ordinary data").decode()),
    ("url-no-userinfo", "see https://docs.example.com/a/b?page=2#top and mailto:ops@example.com"),
    ("email", "contact admin@example.com or root@localhost"),
    ("sql", "SELECT password_hash, token_expiry FROM users WHERE id = 3"),
    ("json-ordinary", json.dumps({"rows": [{"id": 1, "name": "alpha"}], "next": None})),
    ("reset-link-token-in-path", "https://example.com/password-reset/token=?asfbuy3y2cdaqhvei"),
    ("reset-link-path-no-scheme", "Reset it at example.com/password-reset/token=?asfbuy3y2cdaqhvei now."),
    ("password-updated", "Password updated."),
    ("password-updated-json", json.dumps({"message": "Password updated."})),
    ("token-bucket", "We use a token bucket."),
    ("token-bucket-colon", "Rate limiting uses a token bucket: 5 calls refill per minute."),
]


@pytest.mark.parametrize(
    ("text", "secret"), [(t, s) for _, t, s in TRUE_POSITIVES], ids=[i for i, _, _ in TRUE_POSITIVES]
)
def test_a_credential_is_redacted(text: str, secret: str) -> None:
    cleaned = REDACTOR.text(text)

    assert secret not in cleaned
    assert "[redacted:" in cleaned


@pytest.mark.parametrize(
    ("text", "secret"), [(t, s) for _, t, s in TRUE_POSITIVES], ids=[i for i, _, _ in TRUE_POSITIVES]
)
def test_a_credential_inside_a_result_is_redacted_and_named(text: str, secret: str) -> None:
    cleaned, found = REDACTOR.value({"rows": [{"ok": True}, {"message": text}]}, "/result")

    assert secret not in json.dumps(cleaned)
    assert found == ("/result/rows/1/message",)


@pytest.mark.parametrize("text", [t for _, t in FALSE_POSITIVES], ids=[i for i, _ in FALSE_POSITIVES])
def test_a_look_alike_is_left_unchanged(text: str) -> None:
    assert REDACTOR.text(text) == text
    assert REDACTOR.value({"text": text}, "/result") == ({"text": text}, ())
