"""An agent believes only receipts the executor's key signed."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.integrity.signing import generate_keypair, load_private_key, sign_event, sign_value
from effectgate.contracts.vocabulary import Outcome
from effectgate.sdk.receipts import ReceiptKeyMissing, ReceiptVerifier


def _receipt() -> ReceiptIssued:
    return ReceiptIssued(
        event_id="e",
        occurred_at=datetime.now(UTC),
        request_id="r1",
        principal="p",
        outcome=Outcome.SUCCEEDED,
        reason_code="ok",
        reason="ok",
    )


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    generate_keypair(tmp_path, "receipts")
    return tmp_path


def test_a_receipt_signed_by_the_executor_is_believed(keys: Path) -> None:
    signed = sign_event(_receipt(), load_private_key(keys / "receipts.key"))
    found = ReceiptVerifier.from_directory(keys).verified(msgspec.json.encode(signed))
    assert found is not None and found.request_id == "r1"


def test_a_receipt_with_a_field_this_client_does_not_know_is_still_believed(keys: Path) -> None:
    body = {k: v for k, v in msgspec.to_builtins(_receipt()).items() if k != "signature"}
    body["added_by_a_newer_executor"] = [1, 2]
    body["signature"] = sign_value(body, load_private_key(keys / "receipts.key"))
    assert ReceiptVerifier.from_directory(keys).verified(msgspec.json.encode(body)) is not None


@pytest.mark.parametrize(
    "data",
    [
        lambda key: msgspec.json.encode(_receipt()),
        lambda key: msgspec.json.encode(sign_event(_receipt(), Ed25519PrivateKey.generate())),
        lambda key: msgspec.json.encode({**msgspec.to_builtins(sign_event(_receipt(), key)), "outcome": "failed"}),
        lambda key: b"not json",
        lambda key: b'{"type": "receipt.issued"}',
    ],
    ids=["unsigned", "foreign-signed", "edited-after-signing", "not-json", "not-a-receipt"],
)
def test_anything_else_is_ignored(keys: Path, data: object) -> None:
    key = load_private_key(keys / "receipts.key")
    assert ReceiptVerifier.from_directory(keys).verified(data(key)) is None  # type: ignore[operator]


def test_without_the_key_the_client_refuses_to_start_unless_told_not_to_verify(tmp_path: Path) -> None:
    with pytest.raises(ReceiptKeyMissing, match="receipts.pub"):
        ReceiptVerifier.from_directory(tmp_path)
    unverified = ReceiptVerifier.from_directory(tmp_path, verify=False)
    assert unverified.verified(msgspec.json.encode(_receipt())) is not None


def test_the_directory_comes_from_the_environment_when_not_given(keys: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EFFECTGATE_PUBLIC_KEYS_DIR", str(keys))
    signed = sign_event(_receipt(), load_private_key(keys / "receipts.key"))
    assert ReceiptVerifier.from_directory(None).verified(msgspec.json.encode(signed)) is not None
