"""Over the bus, only a descriptor signed by the operator key is published."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from toolgate.contracts.signing import sign_value
from toolgate.registry.domain import MAX_DESCRIPTOR_BYTES, parse_publish_request
from toolgate.registry.errors import PublishRefused

OPERATOR = Ed25519PrivateKey.generate()
DESCRIPTOR: dict[str, Any] = json.loads((Path(__file__).parents[3] / "deploy/tools/file_system.json").read_text())


def _body(descriptor: Any, signature: str) -> bytes:
    return json.dumps({"descriptor": descriptor, "signature": signature}).encode()


def test_a_descriptor_signed_by_the_operator_is_accepted() -> None:
    found = parse_publish_request(_body(DESCRIPTOR, sign_value(DESCRIPTOR, OPERATOR)), OPERATOR.public_key())
    assert found.name == DESCRIPTOR["name"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (lambda: _body(DESCRIPTOR, ""), "not_operator"),
        (lambda: _body(DESCRIPTOR, sign_value(DESCRIPTOR, Ed25519PrivateKey.generate())), "not_operator"),
        (lambda: _body({**DESCRIPTOR, "version": "9.9.9"}, sign_value(DESCRIPTOR, OPERATOR)), "not_operator"),
        (lambda: _body(DESCRIPTOR, "!!not base64!!"), "not_operator"),
        (lambda: json.dumps(DESCRIPTOR).encode(), "malformed"),
        (lambda: b"[1, 2", "malformed"),
        (lambda: b" " * (MAX_DESCRIPTOR_BYTES + 1), "oversized"),
        (lambda: _body({"name": "x"}, sign_value({"name": "x"}, OPERATOR)), "malformed"),
    ],
)
def test_anything_else_is_refused_naming_why(body: Any, code: str) -> None:
    with pytest.raises(PublishRefused) as refused:
        parse_publish_request(body(), OPERATOR.public_key())
    assert refused.value.reason_code == code


def test_without_an_operator_key_nothing_is_published_over_the_bus() -> None:
    with pytest.raises(PublishRefused, match="no operator key"):
        parse_publish_request(_body(DESCRIPTOR, sign_value(DESCRIPTOR, OPERATOR)), None)
