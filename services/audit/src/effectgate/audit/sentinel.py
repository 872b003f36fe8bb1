"""What the audit checks on intake: signed subjects, and the alarm of a security event.

Some subjects only one service may publish, and it signs what it publishes there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.audit.domain import AuditRecord
from effectgate.contracts.bus.catalog import Subjects, matches, names_its_request, security_of
from effectgate.contracts.events import (
    ApprovalGranted,
    ApprovalRejected,
    ApprovalRequested,
    ApprovalVoted,
    DecisionMade,
    PolicyPublished,
    ReceiptIssued,
    SecurityEvent,
    UncertainResolved,
    decode_untrusted,
)
from effectgate.contracts.integrity.signing import verify_body
from effectgate.contracts.rpc.audit import Alarm
from effectgate.contracts.security import SecurityKind

__all__ = ["SIGNED", "Forgery", "SignedSubject", "alarm_of", "forgery", "is_security_event"]


@dataclass(frozen=True)
class SignedSubject:
    """A subject only one service publishes, and signs.

    Attributes:
        pattern: the subject pattern (``*`` is one token), ending ``<principal>.<request id>``
            when ``per_request``.
        event: the event type it carries.
        key: the signer's key name (``<key>.pub`` in the keys directory).
        kind: what a message breaking the rule is reported as.
        per_request: the event names the request its subject names (``False``: a subject
            of no request, e.g. ``tg.policy.published``).
    """

    pattern: str
    event: type[Any]
    key: str
    kind: SecurityKind
    per_request: bool = True


SIGNED: tuple[SignedSubject, ...] = (
    SignedSubject(Subjects.DECISIONS, DecisionMade, "policy", SecurityKind.DECISION_FORGED),
    SignedSubject(Subjects.NEEDS_APPROVAL, DecisionMade, "policy", SecurityKind.DECISION_FORGED),
    SignedSubject(Subjects.APPROVALS_REQUESTED, ApprovalRequested, "approvals", SecurityKind.APPROVAL_FORGED),
    SignedSubject(Subjects.APPROVALS_GRANTED, ApprovalGranted, "approvals", SecurityKind.APPROVAL_FORGED),
    SignedSubject(Subjects.APPROVALS_REJECTED, ApprovalRejected, "approvals", SecurityKind.APPROVAL_FORGED),
    SignedSubject(Subjects.APPROVALS_VOTED, ApprovalVoted, "approvals", SecurityKind.APPROVAL_FORGED),
    SignedSubject(Subjects.RECEIPTS, ReceiptIssued, "receipts", SecurityKind.RECEIPT_FORGED),
    SignedSubject(Subjects.RESOLUTIONS, UncertainResolved, "receipts", SecurityKind.RECEIPT_FORGED),
    SignedSubject(Subjects.POLICY_PUBLISHED, PolicyPublished, "policy", SecurityKind.POLICY_FORGED, per_request=False),
)

_decoders = {rule.event: msgspec.json.Decoder(rule.event) for rule in SIGNED}
_security = msgspec.json.Decoder(SecurityEvent)


@dataclass(frozen=True)
class Forgery:
    """A message on a signed subject that breaks its rule, and why."""

    rule: SignedSubject
    detail: str


def forgery(subject: str, data: bytes, keys: Mapping[str, Ed25519PublicKey]) -> Forgery | None:
    """The :class:`Forgery` of one stream message, or ``None`` (genuine, or not a checked subject)."""
    rule = next((rule for rule in SIGNED if matches(rule.pattern, subject)), None)
    if rule is None or rule.key not in keys:
        return None
    try:
        event = decode_untrusted(_decoders[rule.event], data)
    except msgspec.DecodeError:
        return Forgery(rule, f"the body is not a {rule.event.__name__}")
    if rule.per_request and not names_its_request(subject, event):
        return Forgery(rule, f"an event about {event.principal}/{event.request_id} on another request's subject")
    if not verify_body(msgspec.json.decode(data), keys[rule.key]):
        return Forgery(rule, f"not signed by the {rule.key} key")
    return None


def is_security_event(record: AuditRecord) -> bool:
    """Whether ``record`` is a security event on ``tg.security.<service>.<kind>``."""
    return record.event_type == "security.event" and matches(Subjects.SECURITY, record.subject)


def alarm_of(record: AuditRecord) -> Alarm | None:
    """The :class:`Alarm` of a recorded security event; ``None`` when its body is not one."""
    if not is_security_event(record):
        return None
    try:
        event = decode_untrusted(_security, record.payload.encode("utf-8", errors="surrogatepass"))
    except (msgspec.DecodeError, UnicodeEncodeError):
        return None
    service = security_of(record.subject)
    if service is None:
        return None
    return Alarm(sequence=record.sequence, stream_seq=record.stream_seq, service=service[0], event=event)
