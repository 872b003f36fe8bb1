"""Over the bus, only a descriptor signed by the operator key is published."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.integrity.signing import sign_value
from effectgate.registry.domain import MAX_DESCRIPTOR_BYTES, parse_publish_request
from effectgate.registry.errors import PublishRefused

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


def _changed(**read: Any) -> dict[str, Any]:
    """The shipped descriptor with fields of its ``read`` operation replaced."""
    operations = {**DESCRIPTOR["operations"], "read": {**DESCRIPTOR["operations"]["read"], **read}}
    return {**DESCRIPTOR, "operations": operations}


@pytest.mark.parametrize(
    ("descriptor", "code", "field"),
    [
        ({**DESCRIPTOR, "adapter": "python:mod.fn"}, "invalid_adapter", "adapter: 'python:mod.fn'"),
        ({**DESCRIPTOR, "adapter": "http"}, "invalid_adapter", "adapter: 'http'"),
        ({**DESCRIPTOR, "adapter": "mcp:"}, "invalid_adapter", "adapter: 'mcp:'"),
        (
            _changed(amount="/path"),
            "invalid_pointer",
            "operations.read.amount: '/path' names an argument of type string",
        ),
        (_changed(amount="/sum"), "invalid_pointer", "operations.read.amount: '/sum': the input schema declares no"),
        (_changed(cost="/path"), "invalid_pointer", "operations.read.cost: '/path' names an argument of type string"),
        (_changed(destination="/nope"), "invalid_pointer", "operations.read.destination: '/nope': the input schema"),
    ],
)
def test_a_signed_descriptor_with_a_dangling_reference_is_refused_naming_the_field(
    descriptor: dict[str, Any], code: str, field: str
) -> None:
    with pytest.raises(PublishRefused) as refused:
        parse_publish_request(_body(descriptor, sign_value(descriptor, OPERATOR)), OPERATOR.public_key())

    assert (refused.value.reason_code, refused.value.reason[: len(field)]) == (code, field), refused.value.reason
