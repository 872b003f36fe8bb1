"""Canonical hashing (RFC 8785), signatures (Ed25519), semantic versions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from effectgate.contracts.events import BoundRequest, DecisionMade, request_hash
from effectgate.contracts.integrity.canonical import canonical_bytes, sha256_hex
from effectgate.contracts.integrity.signing import (
    generate_keypair,
    load_private_key,
    load_public_key,
    sign_event,
    verify_event,
)
from effectgate.contracts.tools.descriptors import semver_key
from effectgate.contracts.vocabulary import Verdict


def test_canonical_json_sorts_keys_and_normalises_numbers() -> None:
    assert canonical_bytes({"b": 1, "a": [1.0, "é"]}) == '{"a":[1,"é"],"b":1}'.encode()
    assert sha256_hex({"a": 1, "b": 2}) == sha256_hex({"b": 2, "a": 1})


def test_request_hash_binds_every_field() -> None:
    bound = BoundRequest(
        principal="p", tool="t", version="1.0.0", descriptor_digest="d", operation="o", arguments={"x": 1}
    )
    changes = [
        {"principal": "q"},
        {"tool": "u"},
        {"version": "1.0.1"},
        {"descriptor_digest": "e"},
        {"operation": "w"},
        {"arguments": {"x": 2}},
    ]
    hashes = {request_hash(msgspec.structs.replace(bound, **change)) for change in changes}
    assert request_hash(bound) not in hashes and len(hashes) == len(changes)


def test_signatures_cover_every_field(tmp_path: Path) -> None:
    generate_keypair(tmp_path, "policy")
    key, public = load_private_key(tmp_path / "policy.key"), load_public_key(tmp_path / "policy.pub")
    assert (tmp_path / "policy.key").stat().st_mode & 0o077 == 0
    decision = DecisionMade(
        event_id="e",
        occurred_at=datetime.now(UTC),
        request_id="r",
        principal="a",
        verdict=Verdict.DENY,
        reason_code="c",
        reason="r",
    )
    signed = sign_event(decision, key)
    assert verify_event(signed, public)
    assert not verify_event(decision, public)
    assert not verify_event(msgspec.structs.replace(signed, verdict=Verdict.EXECUTE), public)
    assert not verify_event(msgspec.structs.replace(signed, signature="!!not base64"), public)


def test_semver_precedence() -> None:
    versions = ["1.0.0", "1.0.0-alpha", "1.10.0", "1.2.0", "0.9.9"]
    assert sorted(versions, key=semver_key) == ["0.9.9", "1.0.0-alpha", "1.0.0", "1.2.0", "1.10.0"]
    with pytest.raises(ValueError):
        semver_key("1.0")


def test_hostile_nesting_is_a_decode_error_not_a_crash() -> None:
    from effectgate.contracts.events import ToolRequested, decode_untrusted

    decoder = msgspec.json.Decoder(dict[str, object])
    with pytest.raises(msgspec.DecodeError):
        decode_untrusted(decoder, b'{"a":' * 5000 + b"1" + b"}" * 5000)
    with pytest.raises(msgspec.DecodeError):
        decode_untrusted(msgspec.json.Decoder(ToolRequested), b"[" * 5000 + b"]" * 5000)


@pytest.mark.parametrize(
    ("body", "msg_id", "expected"),
    [
        (b'{"request_id": "r-1"}', "m-1", "r-1"),
        (b'{"request_id": "bad id"}', "m-1", "m-1"),
        (b"not json", "m-1", "m-1"),
        (b"not json", "bad.id", "seq42"),
        (b"[" * 5000, None, "seq42"),
    ],
)
def test_request_identity(body: bytes, msg_id: str | None, expected: str) -> None:
    from effectgate.contracts.events import request_identity

    assert request_identity(body, msg_id, 42) == expected
