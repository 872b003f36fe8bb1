"""docs/reference/audit-record.md and the audit code agree, through its test vector (audit-record-vector.json).

Two implementations check the same vector: one written from the specification alone
(``hashlib``, ``rfc8785``, ``cryptography``; nothing from effectgate), and the audit's own code
(intake, chaining, verification, offline verification of an export). Changing either the
specification's rules or the code's makes one of them fail.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.audit.domain import AuditRecord, next_record, verify_chain
from effectgate.audit.intake import entry_of
from effectgate.audit.signatures import signature_fault
from effectgate.cli.commands.audit_file import ExportInvalid, verify_file
from effectgate.contracts.integrity.signing import load_public_key

ROOT = Path(__file__).resolve().parents[2]
VECTOR: dict[str, Any] = json.loads((ROOT / "docs" / "reference" / "audit-record-vector.json").read_text())
ENTRIES: list[dict[str, Any]] = VECTOR["entries"]
RECORDS: list[dict[str, Any]] = [entry["record"] for entry in ENTRIES]

# --- the specification, implemented from docs/reference/audit-record.md alone --------------------------

GENESIS = "sha256:" + "0" * 64
MEMBERS = {"sequence", "stream_seq", "subject", "event_type", "request_id", "principal", "occurred_at", "payload"}
SIGNERS = {
    "decision.made": "policy",
    "policy.published": "policy",
    "approval.requested": "approvals",
    "approval.granted": "approvals",
    "approval.rejected": "approvals",
    "approval.voted": "approvals",
    "receipt.issued": "receipts",
}


def sha256_text(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def hash_input(record: dict[str, Any]) -> bytes:
    """RFC 8785 bytes of the hash input: the members but ``payload`` and ``hash``, plus ``payload_sha256``."""
    body = {name: record[name] for name in MEMBERS - {"payload"}}
    body["prev_hash"] = record["prev_hash"]
    body["payload_sha256"] = sha256_text(record["payload"].encode("utf-8"))
    return rfc8785.dumps(body)


def chain_faults(records: list[dict[str, Any]]) -> list[str]:
    """Every rule of §4 a record list breaks, as ``"<sequence>: <rule>"``."""
    faults, prev_hash = [], GENESIS
    for position, record in enumerate(records, start=1):
        if set(record) != MEMBERS | {"prev_hash", "hash"}:
            faults.append(f"{position}: members")
        if record["sequence"] != position:
            faults.append(f"{position}: sequence")
        if record["prev_hash"] != prev_hash:
            faults.append(f"{position}: prev_hash")
        if sha256_text(hash_input(record)) != record["hash"]:
            faults.append(f"{position}: hash")
        prev_hash = record["hash"]
    return faults


def signature_valid(record: dict[str, Any], keys: dict[str, str]) -> bool:
    """§5: Ed25519 over the RFC 8785 payload object without ``signature``."""
    body = json.loads(record["payload"])
    signature = base64.b64decode(body.pop("signature"))
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(keys[SIGNERS[record["event_type"]]]))
    try:
        key.verify(signature, rfc8785.dumps(body))
    except InvalidSignature:
        return False
    return True


def test_the_vector_verifies_under_the_specification() -> None:
    assert VECTOR["format"] == 1 and VECTOR["genesis"] == GENESIS
    assert chain_faults(RECORDS) == []


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry["record"]["event_type"])
def test_each_hash_input_is_the_canonical_bytes_the_vector_shows(entry: dict[str, Any]) -> None:
    canonical = hash_input(entry["record"])
    assert canonical == entry["hash_input"].encode("utf-8")
    assert hashlib.sha256(canonical).hexdigest() == entry["hash_input_sha256"]
    assert sha256_text(entry["record"]["payload"].encode("utf-8")) == entry["payload_sha256"]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry["record"]["event_type"])
def test_the_payload_is_the_message_body_as_utf8_with_bad_bytes_escaped(entry: dict[str, Any]) -> None:
    data = bytes.fromhex(entry["message"]["data_hex"])
    assert entry["record"]["payload"] == data.decode("utf-8", errors="backslashreplace")


def test_signed_records_verify_under_their_signers_key() -> None:
    signed = [record for record in RECORDS if record["event_type"] in SIGNERS]
    assert signed and all(signature_valid(record, VECTOR["public_keys"]) for record in signed)


@pytest.mark.parametrize(
    ("member", "value"),
    [("principal", "bob"), ("occurred_at", "2026-01-15T09:30:00Z"), ("payload", "{}"), ("sequence", 7)],
)
def test_an_edited_member_breaks_the_chain_under_the_specification(member: str, value: Any) -> None:
    edited = [dict(record) for record in RECORDS]
    edited[1][member] = value
    assert any(fault.startswith("2: ") for fault in chain_faults(edited))


# --- the audit's code produces and accepts exactly the vector --------------------------------


def test_the_audit_builds_the_vector_records_from_the_vector_messages() -> None:
    built: list[AuditRecord] = []
    for entry in ENTRIES:
        message = entry["message"]
        data = bytes.fromhex(message["data_hex"])
        msg_id, stream_seq, received_at = message["nats_msg_id"], message["stream_seq"], message["received_at"]
        found = entry_of(message["subject"], data, msg_id, stream_seq, received_at)
        built.append(next_record(built[-1] if built else None, found))
    assert [msgspec.to_builtins(record) for record in built] == RECORDS
    assert verify_chain(built).ok


def test_the_audit_verifies_the_vector_signatures(tmp_path: Path) -> None:
    keys = {}
    for name, public in VECTOR["public_keys"].items():
        (tmp_path / f"{name}.pub").write_text(public)
        keys[name] = load_public_key(tmp_path / f"{name}.pub")
    records = [msgspec.convert(record, AuditRecord) for record in RECORDS]
    assert [signature_fault(record, keys) for record in records] == [None] * len(records)


def export_of(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    for name, public in VECTOR["public_keys"].items():
        (tmp_path / f"{name}.pub").write_text(public)
    export = tmp_path / "chain.jsonl"
    export.write_text("".join(json.dumps(record) + "\n" for record in records))
    return export


def test_an_export_of_the_vector_verifies_offline(tmp_path: Path) -> None:
    checked = verify_file(export_of(tmp_path, RECORDS), tmp_path)
    assert checked.ok and checked.result.checked == len(RECORDS)


def test_an_export_line_of_another_format_is_refused_naming_the_member(tmp_path: Path) -> None:
    later = [*RECORDS[:2], {**RECORDS[2], "format": 2}]
    with pytest.raises(ExportInvalid, match=r"line 3 .*`format`"):
        verify_file(export_of(tmp_path, later), tmp_path)
