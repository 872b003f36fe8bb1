"""What the executor reports when a decision or an approval is not genuine.

Every rejection here still happens (the message is terminated, nothing runs); this
module only names it as a security event (:mod:`toolgate.shared.reporting`):

- ``decision_forged``: a message on ``tg.decision.<p>.<rid>`` that is not a decision, is
  about another request (copied), or is not signed by the policy key; or a grant whose
  request's first decision does not verify;
- ``approval_forged``: a message on ``tg.approval.{granted,rejected}.<p>.<rid>`` that is
  not such an event, is about another request, is not signed by the approvals key, refers
  to a request without a ``needs_approval`` decision, or binds other content than it.
"""

from __future__ import annotations

from typing import Any

from toolgate.contracts.events import ApprovalGranted, ApprovalRejected, DecisionMade
from toolgate.contracts.security import SecurityKind
from toolgate.shared.reporting import SecurityReporter

__all__ = ["about_subject", "report_event", "report_message"]

_APPROVAL_KIND = {ApprovalGranted: "granted", ApprovalRejected: "rejected"}


def about_subject(subject: str, event: DecisionMade | ApprovalGranted | ApprovalRejected) -> bool:
    """Whether ``event`` belongs on ``subject``: its principal and request id are the subject's last two tokens.

    For a grant or rejection the kind token (``tg.approval.<kind>.…``) must match its type too.
    """
    tokens = subject.split(".")
    kind = _APPROVAL_KIND.get(type(event))
    if kind is not None and tokens[2:3] != [kind]:
        return False
    return tokens[-2:] == [event.principal, event.request_id]


def report_message(reporter: SecurityReporter, kind: SecurityKind, subject: str, data: bytes, event: Any) -> None:
    """Report a message that is not the event its subject should carry (``event`` ``None``: undecodable)."""
    tokens = subject.split(".")
    if event is None:
        detail = "the body is not the event this subject carries"
    else:
        tag = type(event).__struct_config__.tag
        detail = f"an event {tag} about {event.principal}/{event.request_id} on a subject not its own"
    reporter.report(
        kind,
        principal=tokens[-2] if len(tokens) >= 4 else None,
        request_id=tokens[-1] if len(tokens) >= 4 else None,
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
