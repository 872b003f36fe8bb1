"""What the executor reports when a decision or an approval is not genuine."""

from __future__ import annotations

from typing import Any

from effectgate.contracts.bus.catalog import names_its_request, request_subject_of
from effectgate.contracts.events import ApprovalGranted, ApprovalRejected, DecisionMade
from effectgate.contracts.security import SecurityKind
from effectgate.shared.runtime.reporting import SecurityReporter

__all__ = ["about_subject", "report_event", "report_message"]

_APPROVAL_KIND = {ApprovalGranted: "granted", ApprovalRejected: "rejected"}


def about_subject(subject: str, event: DecisionMade | ApprovalGranted | ApprovalRejected) -> bool:
    """Whether ``event`` belongs on ``subject``: its principal and request id are the subject's last two tokens.

    For a grant or rejection the kind token (``tg.approval.<kind>.…``) must match its type too.
    """
    named, kind = request_subject_of(subject), _APPROVAL_KIND.get(type(event))
    if kind is not None and (named is None or named.kind != f"approval.{kind}"):
        return False
    return names_its_request(subject, event)


def report_message(reporter: SecurityReporter, kind: SecurityKind, subject: str, data: bytes, event: Any) -> None:
    """Report a message that is not the event its subject should carry (``event`` ``None``: undecodable)."""
    named = request_subject_of(subject)
    if event is None:
        detail = "the body is not the event this subject carries"
    else:
        tag = type(event).__struct_config__.tag
        detail = f"an event {tag} about {event.principal}/{event.request_id} on a subject not its own"
    reporter.report(
        kind,
        principal=None if named is None else named.principal,
        request_id=None if named is None else named.request_id,
        subject=subject,
        detail=detail,
        payload=data,
    )


def report_event(reporter: SecurityReporter, kind: SecurityKind, event: Any, subject: str, detail: str) -> None:
    """Report a decoded decision, grant or rejection that cannot be trusted, and why."""
    reporter.report(
        kind,
        principal=event.principal,
        request_id=event.request_id,
        approval_id=getattr(event, "approval_id", None),
        subject=subject,
        detail=detail,
    )
