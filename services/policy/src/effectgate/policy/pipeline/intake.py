"""The first step of the policy pipeline on a decoded tool request: its identifiers.

The message was read by the broker edge (:mod:`effectgate.policy.handlers.requests`: a
request its principal sent, within the size limit, a tool request whose values all have a
canonical form); here its identifiers must be valid (:func:`check_identifiers`). Every step
that ends a request raises :class:`Ended`. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.errors import Problem
from effectgate.contracts.events import ToolRequested
from effectgate.contracts.tools.descriptors import SEMVER, TOOL_NAME
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.outcomes import PolicyOutcome
from effectgate.shared.secrets.invisible import is_invisible

__all__ = ["MAX_IDEMPOTENCY_KEY_CHARS", "Ended", "Envelope", "check_identifiers"]

MAX_IDEMPOTENCY_KEY_CHARS = 255
"""Longest accepted idempotency key, as Stripe's and the IETF Idempotency-Key draft's."""


@dataclass(frozen=True)
class Envelope:
    """What the transport says about one request message.

    Attributes:
        principal: the subject token (the transport-authenticated principal).
        data: the raw body.
        request_id: the id the message is known by (``request_identity``), used for
            requests whose body cannot be read.
        copied_from: the stream named by the message's ``Nats-Stream`` header: the server
            adds it to a direct get's reply, so a message carrying it is a stored message
            someone aimed at a request subject (the reply subject of a direct get), not a
            request its principal sent.
        first_delivery: the consumer delivers it for the first time (a redelivery may have
            been decided, and admitted, before).
    """

    principal: str
    data: bytes
    request_id: str
    copied_from: str | None = None
    first_delivery: bool = True


class Ended(Problem):
    """The request ends here with this verdict and reason (a refusal or a denial)."""

    def __init__(
        self,
        verdict: Verdict,
        reason_code: str,
        reason: str,
        hidden: PolicyOutcome | None = None,
        retry_after_s: float | None = None,
        policy_verdict: Verdict | None = None,
    ) -> None:
        super().__init__(reason)
        self.verdict, self.reason_code, self.reason, self.hidden = verdict, reason_code, reason, hidden
        self.retry_after_s, self.policy_verdict = retry_after_s, policy_verdict


def check_identifiers(request: ToolRequested) -> None:
    """Refuse (:class:`Ended`) a request whose request id, idempotency key, tool or version cannot be valid."""
    if not TOKEN.match(request.request_id):
        raise Ended(Verdict.REFUSE, "invalid_request_id", "request_id must match [A-Za-z0-9_-]{1,64}")
    key = request.idempotency_key
    if not 0 < len(key) <= MAX_IDEMPOTENCY_KEY_CHARS or not key.isprintable() or any(map(is_invisible, key)):
        reason = "idempotency_key must have 1 to 255 printable characters (none invisible or direction-changing)"
        raise Ended(Verdict.REFUSE, "invalid_idempotency_key", reason)
    if not TOOL_NAME.match(request.tool):
        raise Ended(Verdict.REFUSE, "invalid_tool", f"tool must match {TOOL_NAME.pattern}")
    if request.version is not None and not SEMVER.match(request.version):
        raise Ended(Verdict.REFUSE, "invalid_version", "version must be a semantic version (SemVer 2.0.0)")
