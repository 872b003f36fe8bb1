"""What a security event says: its kinds, and the rules that keep its fields safe to record.

A security event (:class:`effectgate.contracts.events.SecurityEvent`) records an attempt a
service refused because it was not allowed or not genuine: an approval answer that may not be
carried out, an event whose signature does not verify, a publish the NATS server refused.
"""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum

from effectgate.contracts.bus.catalog import TOKEN

__all__ = [
    "DETAIL_MAX_CHARS",
    "SUBJECT_MAX_CHARS",
    "SecurityKind",
    "bounded",
    "digest",
    "safe_token",
    "violation_of",
]

DETAIL_MAX_CHARS = 300
"""Longest ``detail`` kept, characters; longer text is cut and ends with ``…``."""

SUBJECT_MAX_CHARS = 256
"""Longest ``subject`` kept, characters."""


class SecurityKind(StrEnum):
    """What was attempted and refused; the last token of ``tg.security.<service>.<kind>``."""

    APPROVAL_REFUSED = "approval_refused"
    """An approve/reject answer was refused: unknown approver, approver without the role,
    self-approval, expired or already answered approval, unknown approval id, malformed
    or oversized answer (``reason_code`` says which)."""
    DECISION_FORGED = "decision_forged"
    """A message on a decision subject that is not a policy-signed decision for that request."""
    APPROVAL_FORGED = "approval_forged"
    """A grant or rejection that is not approvals-signed, is for another request, or binds
    other content than the request's decision."""
    RECEIPT_FORGED = "receipt_forged"
    """A message on a receipt subject that is not an executor-signed receipt for that request."""
    PERMISSION_VIOLATION = "permission_violation"
    """The NATS server refused a publish or subscription on the reporting service's own connection."""
    PUBLISH_REFUSED = "publish_refused"
    """A descriptor sent to ``tg.registry.publish`` without the operator's signature was refused
    (reported by the registry, ``reason_code`` ``not_operator``)."""
    POLICY_FORGED = "policy_forged"
    """A message on ``tg.policy.published`` that is not a policy-signed :class:`PolicyPublished`."""
    POLICY_REFUSED = "policy_refused"
    """A policy publication (``tg.policy.publish``) was refused: malformed or oversized,
    or a text that does not build; nothing changed (``detail`` says why)."""
    POLICY_NOT_APPLIED = "policy_not_applied"
    """A policy replica could not build the published policy version and keeps deciding
    under the one it had: the replicas disagree until it is fixed (``detail`` says why)."""
    STORE_NEARLY_FULL = "store_nearly_full"
    """The record stream's usage crossed the high-water mark of its byte limit: new requests are
    denied ``store_full`` until room is made (``detail`` gives the bytes used and the limit)."""


def digest(data: bytes | str) -> str:
    """``sha256:<64 hex>`` of ``data`` (UTF-8 for text)."""
    raw = data.encode("utf-8", errors="surrogatepass") if isinstance(data, str) else data
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def safe_token(value: str | None) -> str | None:
    """``value`` when it is one subject token (:data:`catalog.TOKEN`), else its :func:`digest`.

    An identifier an attacker chose (an approval id, an approver token) is recorded as
    given only when it cannot carry anything but a name.
    """
    if value is None or TOKEN.match(value):
        return value
    return digest(value)


def bounded(text: str, limit: int = DETAIL_MAX_CHARS) -> str:
    """``text`` without control characters, cut to ``limit`` characters (ending ``…`` when cut)."""
    clean = "".join(c if c.isprintable() else " " for c in text)
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


_VIOLATION = re.compile(r'permissions violation for (publish|subscription) to "([^"]*)"', re.IGNORECASE)


def violation_of(error: BaseException) -> tuple[str, str] | None:
    """``(operation, subject)`` of a NATS permissions violation, else ``None``.

    nats-server answers a refused publish or subscription with ``-ERR 'Permissions
    Violation for Publish to "<subject>"'`` (or ``Subscription``), which nats-py hands to
    the connection's ``error_cb`` as ``nats.errors.Error("nats: <text>")`` — lowercased
    (nats-py 2.x), so the subject is reported in lower case.

    Returns:
        ``("publish" | "subscription", subject)``, the subject cut to :data:`SUBJECT_MAX_CHARS`.
    """
    found = _VIOLATION.search(str(error))
    if found is None:
        return None
    return found.group(1).lower(), bounded(found.group(2), SUBJECT_MAX_CHARS)
