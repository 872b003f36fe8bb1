"""An agent believes a stored decision only when the policy's key signed it about its own request."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.events import DecisionMade
from effectgate.contracts.integrity.signing import generate_keypair, load_private_key, sign_event
from effectgate.contracts.vocabulary import Verdict
from effectgate.sdk.standing import DecisionVerifier


def _decision(principal: str = "p", request_id: str = "r1") -> DecisionMade:
    return DecisionMade(
        event_id="d",
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        principal=principal,
        verdict=Verdict.NEEDS_APPROVAL,
        reason_code="approval_required",
        reason="needs an operator",
    )


@pytest.fixture
def key(tmp_path: Path) -> Ed25519PrivateKey:
    generate_keypair(tmp_path, "policy")
    return load_private_key(tmp_path / "policy.key")


def test_a_decision_signed_by_the_policy_about_this_request_is_believed(tmp_path: Path, key: Ed25519PrivateKey) -> None:
    data = msgspec.json.encode(sign_event(_decision(), key))
    found = DecisionVerifier.from_directory(tmp_path).verified(data, "p", "r1")
    assert found is not None and found.verdict is Verdict.NEEDS_APPROVAL


@pytest.mark.parametrize(
    "data",
    [
        lambda key: msgspec.json.encode(_decision()),
        lambda key: msgspec.json.encode(sign_event(_decision(), Ed25519PrivateKey.generate())),
        lambda key: msgspec.json.encode({**msgspec.to_builtins(sign_event(_decision(), key)), "verdict": "execute"}),
        lambda key: msgspec.json.encode(sign_event(_decision(principal="other"), key)),
        lambda key: msgspec.json.encode(sign_event(_decision(request_id="r2"), key)),
        lambda key: b"not json",
    ],
    ids=["unsigned", "foreign-signed", "edited-after-signing", "other-principal", "other-request", "not-json"],
)
def test_anything_else_reads_as_no_decision(
    tmp_path: Path, key: Ed25519PrivateKey, data: Callable[[Ed25519PrivateKey], bytes]
) -> None:
    assert DecisionVerifier.from_directory(tmp_path).verified(data(key), "p", "r1") is None


def test_without_the_policy_key_only_the_request_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EFFECTGATE_PUBLIC_KEYS_DIR", raising=False)
    verifier = DecisionVerifier.from_directory(tmp_path)
    assert verifier.verified(msgspec.json.encode(_decision()), "p", "r1") is not None
    assert verifier.verified(msgspec.json.encode(_decision(principal="other")), "p", "r1") is None
