"""The line of one record (pure) and the output file's resumption (a local file)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from siem_forwarder.output import Output
from siem_forwarder.records import line_of

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ApprovalRejected, encode
from effectgate.contracts.integrity.signing import sign_event

KEY = Ed25519PrivateKey.generate()
KEYS = {"approvals": KEY.public_key()}
AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def rejected(request_id: str = "r1") -> ApprovalRejected:
    return ApprovalRejected(
        event_id=f"e-{request_id}",
        occurred_at=AT,
        request_id=request_id,
        principal="demo-agent",
        approval_id="a1",
        reason_code="rejected",
        reason="no",
    )


def test_a_signed_record_is_verified_and_named_by_its_subject() -> None:
    line = line_of(7, Subjects.approval("rejected", "demo-agent", "r1"), encode(sign_event(rejected(), KEY)), AT, KEYS)
    assert (line.seq, line.type, line.principal, line.request_id, line.verified, line.fault) == (
        7,
        "approval.rejected",
        "demo-agent",
        "r1",
        True,
        None,
    )
    assert msgspec.json.decode(msgspec.json.encode(line))["record"]["approval_id"] == "a1"


def test_unsigned_forged_and_misplaced_records_are_flagged() -> None:
    subject = Subjects.approval("rejected", "demo-agent", "r1")
    forged = sign_event(rejected(), Ed25519PrivateKey.generate())
    cases = {
        "unsigned": encode(rejected()),
        "signature does not verify under approvals.pub": encode(forged),
        "names another request than its subject": encode(sign_event(rejected("r2"), KEY)),
        "not a JSON object": b"\xff not json\n{",
    }
    for fault, data in cases.items():
        line = line_of(1, subject, data, AT, KEYS)
        assert (line.verified, line.fault) == (False, fault)
    assert (
        line_of(1, subject, encode(sign_event(rejected(), KEY)), AT, {}).fault == "no approvals.pub to verify it with"
    )


def test_a_record_that_is_no_json_is_kept_as_text_on_one_line(tmp_path: Path) -> None:
    output = Output(tmp_path / "audit.jsonl")
    output.write(line_of(3, Subjects.receipt("p", "r"), b"line one\nline two", AT, KEYS))
    output.close()
    [text] = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert msgspec.json.decode(text)["record"] == "line one\nline two"


def test_the_file_resumes_at_its_last_whole_line_and_cuts_a_torn_one(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    output = Output(path)
    assert output.last == 0
    for seq in (2, 5):
        output.write(line_of(seq, Subjects.receipt("p", "r"), b"{}", AT, KEYS))
    output.close()
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"seq":9,"subj')  # a crash inside a write: the record was never acked
    assert Output(path).last == 5
    assert path.read_bytes() == whole
