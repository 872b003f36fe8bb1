"""One stream record as one JSON line: who it is about, and whether its signature verifies.

Pure (no I/O). Decisions are signed by the policy key, approval outcomes by the approvals key,
receipts by the executor's receipts key (Ed25519 over the RFC 8785 canonical JSON of the event
as sent without its ``signature``: :func:`effectgate.contracts.integrity.signing.verify_body`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.contracts.bus.catalog import Subjects, matches, names_its_request, request_subject_of
from effectgate.contracts.events import ApprovalGranted, ApprovalRejected, DecisionMade, ReceiptIssued, decode_untrusted
from effectgate.contracts.integrity.signing import verify_body

__all__ = ["SIGNERS", "Line", "Signer", "fault_of", "line_of"]


@dataclass(frozen=True)
class Signer:
    """Who signs the events of one subject pattern: ``<key>.pub`` verifies them."""

    pattern: str
    event: type[Any]
    key: str

    @property
    def tag(self) -> str:
        """The event's ``type`` tag (e.g. ``receipt.issued``)."""
        return str(self.event.__struct_config__.tag)


SIGNERS: tuple[Signer, ...] = (
    Signer(Subjects.DECISIONS, DecisionMade, "policy"),
    Signer(Subjects.APPROVALS_GRANTED, ApprovalGranted, "approvals"),
    Signer(Subjects.APPROVALS_REJECTED, ApprovalRejected, "approvals"),
    Signer(Subjects.RECEIPTS, ReceiptIssued, "receipts"),
)
"""Every subject the auditor's consumer delivers (``catalog.AUDITED_SUBJECTS``) and its signer."""

_decoders = {signer.event: msgspec.json.Decoder(signer.event) for signer in SIGNERS}


class Line(msgspec.Struct, frozen=True, kw_only=True):
    """One line of the output file.

    Attributes:
        seq: the record's stream sequence (the output is ordered and deduplicated by it).
        subject: the subject it was stored on (what the transport authorised).
        type: the event's ``type`` tag as the record states it; ``None`` when it states none.
        principal: the principal the subject names; request_id: the request it names.
        time: when the stream stored the record (UTC, ISO 8601).
        verified: its signature verifies under the signer's public key, and it is the event its subject says.
        fault: why it is not verified; ``None`` when it is.
        record: the record itself (compact JSON), or its text when it is no JSON.
    """

    seq: int
    subject: str
    type: str | None
    principal: str | None
    request_id: str | None
    time: str
    verified: bool
    fault: str | None
    record: msgspec.Raw | str


def _body(data: bytes) -> dict[str, Any] | None:
    try:
        body = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


def _event_fault(signer: Signer, subject: str, data: bytes) -> str | None:
    try:
        event = decode_untrusted(_decoders[signer.event], data)
    except msgspec.DecodeError as error:
        return f"not a well-formed {signer.tag}: {error}"
    return None if names_its_request(subject, event) else "names another request than its subject"


def fault_of(subject: str, data: bytes, keys: Mapping[str, Ed25519PublicKey]) -> str | None:
    """Why the record ``data`` on ``subject`` is not to be trusted, or ``None`` when its signature verifies."""
    signer = next((signer for signer in SIGNERS if matches(signer.pattern, subject)), None)
    if signer is None:
        return "not an audited subject"
    body = _body(data)
    if body is None:
        return "not a JSON object"
    if body.get("type") != signer.tag:
        return f"not a {signer.tag}"
    if (fault := _event_fault(signer, subject, data)) is not None:
        return fault
    if (key := keys.get(signer.key)) is None:
        return f"no {signer.key}.pub to verify it with"
    if not body.get("signature"):
        return "unsigned"
    return None if verify_body(body, key) else f"signature does not verify under {signer.key}.pub"


def _record(data: bytes) -> msgspec.Raw | str:
    """``data`` as compact JSON on one line; its text (invalid UTF-8 replaced) when it is no JSON."""
    try:
        return msgspec.Raw(msgspec.json.format(data, indent=0)) if _body(data) is not None else _text(data)
    except (msgspec.DecodeError, RecursionError):
        return _text(data)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def line_of(seq: int, subject: str, data: bytes, stored: datetime, keys: Mapping[str, Ed25519PublicKey]) -> Line:
    """The :class:`Line` of the record ``data`` stored as ``seq`` on ``subject`` at ``stored``."""
    fault, body, named = fault_of(subject, data, keys), _body(data), request_subject_of(subject)
    kind = body.get("type") if body is not None else None
    return Line(
        seq=seq,
        subject=subject,
        type=kind if isinstance(kind, str) else None,
        principal=named.principal if named else None,
        request_id=named.request_id if named else None,
        time=stored.isoformat(),
        verified=fault is None,
        fault=fault,
        record=_record(data),
    )
