"""Signed event types are checked under their signer's key; anything else in the chain is not."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.audit.domain import AuditEntry, AuditRecord, next_record
from effectgate.audit.signatures import SIGNED_BY, SignatureCheck, signature_fault
from effectgate.contracts.events import ReceiptIssued, UncertainResolved
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Outcome

KEYS = {name: Ed25519PrivateKey.generate() for name in set(SIGNED_BY.values())}
PUBLIC = {name: key.public_key() for name, key in KEYS.items()}


SUBJECTS = {"receipt.issued": "tg.receipt.p.r", "decision.made": "tg.decision.p.r", "tool.requested": "tg.req.p"}


def _record(payload: str, event_type: str = "receipt.issued", subject: str | None = None) -> AuditRecord:
    entry = AuditEntry(
        stream_seq=1,
        subject=subject or SUBJECTS[event_type],
        event_type=event_type,
        request_id="r",
        principal="p",
        occurred_at="t",
        payload=payload,
    )
    return next_record(None, entry)


def _receipt(**changes: object) -> ReceiptIssued:
    receipt = ReceiptIssued(
        event_id="e",
        occurred_at=datetime.now(UTC),
        request_id="r",
        principal="p",
        outcome=Outcome.SUCCEEDED,
        reason_code="ok",
        reason="ok",
    )
    return msgspec.structs.replace(receipt, **changes)


def test_a_receipt_signed_by_the_receipts_key_verifies() -> None:
    payload = msgspec.json.encode(sign_event(_receipt(), KEYS["receipts"])).decode()
    assert signature_fault(_record(payload), PUBLIC) is None


def test_a_field_added_by_a_newer_signer_still_verifies() -> None:
    """The signature covers the fields as sent, not this version's idea of the event."""
    body = msgspec.to_builtins(_receipt())
    body.pop("signature")
    body["added_later"] = "x"
    from effectgate.contracts.integrity.signing import sign_value

    body["signature"] = sign_value(body, KEYS["receipts"])
    assert signature_fault(_record(json.dumps(body)), PUBLIC) is None


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (lambda: msgspec.json.encode(_receipt()).decode(), "unsigned"),
        (lambda: msgspec.json.encode(sign_event(_receipt(), KEYS["policy"])).decode(), "does not verify"),
        (lambda: msgspec.json.encode(sign_event(_receipt(), Ed25519PrivateKey.generate())).decode(), "does not verify"),
        (
            lambda: json.dumps({**msgspec.to_builtins(sign_event(_receipt(), KEYS["receipts"])), "outcome": "failed"}),
            "does not verify",
        ),
        (lambda: "not json", "not JSON"),
    ],
)
def test_unsigned_foreign_signed_and_edited_receipts_are_named(payload: object, reason: str) -> None:
    assert reason in str(signature_fault(_record(payload()), PUBLIC))  # type: ignore[operator]


def test_without_the_signers_key_a_signed_type_is_unverifiable_not_accepted() -> None:
    payload = msgspec.json.encode(sign_event(_receipt(), KEYS["receipts"])).decode()
    assert "no receipts.pub" in str(signature_fault(_record(payload), {}))


def test_unsigned_event_types_are_not_checked_and_every_fault_is_counted() -> None:
    check = SignatureCheck(PUBLIC, keep=1)
    records = [_record("{}", "tool.requested"), _record("{}"), _record("{}", "decision.made")]
    assert list(check.watch(records)) == records
    assert check.count == 2 and len(check.faults) == 1


@pytest.mark.parametrize(
    ("event_type", "subject"),
    [
        ("decision.made", "tg.req.p"),  # an agent's own request subject: recorded as it sent it
        ("receipt.issued", "tg.req.p"),
        ("receipt.issued", "tg.decision.p.r"),  # another type's signed subject: the intake reports it
    ],
)
def test_a_signed_type_off_its_signed_subject_is_not_its_signers_event(event_type: str, subject: str) -> None:
    check = SignatureCheck(PUBLIC)
    list(check.watch([_record("{}", event_type, subject)]))
    assert check.count == 0
    assert signature_fault(_record("{}", event_type), PUBLIC) is not None  # on its own subject it is checked


def _resolution(**changes: object) -> UncertainResolved:
    resolution = UncertainResolved(
        event_id="rsl_1",
        occurred_at=datetime.now(UTC),
        request_id="r",
        principal="p",
        receipt_id="receipt:p:r",
        resolution="ran",
        resolved_by="reconciler",
    )
    return msgspec.structs.replace(resolution, **changes)


def test_a_resolution_is_checked_under_the_executor_s_receipts_key_and_a_forged_one_is_named() -> None:
    def record(resolution: UncertainResolved, key: Ed25519PrivateKey) -> AuditRecord:
        payload = msgspec.json.encode(sign_event(resolution, key)).decode()
        return _record(payload, "uncertain.resolved", "tg.resolution.p.r")

    assert signature_fault(record(_resolution(), KEYS["receipts"]), PUBLIC) is None
    forged = record(_resolution(resolution="not_run"), Ed25519PrivateKey.generate())
    check = SignatureCheck(PUBLIC)
    list(check.watch([forged]))
    assert check.count == 1 and "does not verify under receipts.pub" in check.faults[0].reason
    unsigned = _record(msgspec.json.encode(_resolution()).decode(), "uncertain.resolved", "tg.resolution.p.r")
    assert "unsigned uncertain.resolved" in str(signature_fault(unsigned, PUBLIC))
