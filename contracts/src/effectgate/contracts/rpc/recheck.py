"""The re-check at the moment of effect: ``tg.policy.recheck`` request/reply.

Before a call runs on a grant (or on a decision that is no longer fresh), the executor asks the
policy service whether the *current* policy, principal directory and tool registry still allow
exactly that call; the approvals service asks the same before it grants.
"""

from __future__ import annotations

from datetime import datetime

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.contracts.events import BoundRequest
from effectgate.contracts.integrity.signing import verify_event

__all__ = ["ANSWER_MAX_AGE_S", "RecheckAnswer", "RecheckQuery", "valid_answer"]

ANSWER_MAX_AGE_S = 60.0
"""An answer older (or newer, by clock skew) than this is not accepted, seconds."""


class RecheckQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """May this exact call still run now?

    Attributes:
        principal: the requesting principal.
        request: the bound request that would run.
        request_hash: its hash (``events.request_hash``).
        version_pinned: the request named its tool version.
        approver: who granted the approval, when the call runs on a grant.
        admit_request_id: set by the executor when a granted call is about to run: the
            call is admitted now, so its rate budget is consumed, at most once per request
            id however often it is asked; ``None`` (the approvals service on a grant): the
            rate is not looked at.
    """

    principal: str
    request: BoundRequest
    request_hash: str
    version_pinned: bool = False
    approver: str | None = None
    admit_request_id: str | None = None


class RecheckAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """The policy service's signed answer to a :class:`RecheckQuery`.

    Attributes:
        request_hash: the hash of the request the answer is about.
        allowed: the call may run now.
        reason_code: ``still_allowed`` or what changed (``forbidden``, ``no_permit``,
            ``unknown_principal``, ``descriptor_superseded``, ``descriptor_changed``,
            ``approver_not_entitled``, …).
        reason: human text naming what changed.
        checked_at: when the policy answered, UTC.
        admitted_request_id: the query's ``admit_request_id``: whose admission the answer
            is about.
        retry_after_s: for ``rate_limited``, seconds until the call would fit the rate.
        signature: base64 Ed25519 signature by the policy key.
    """

    request_hash: str
    allowed: bool
    reason_code: str
    reason: str
    checked_at: datetime
    admitted_request_id: str | None = None
    retry_after_s: float | None = None
    signature: str = ""


def valid_answer(answer: RecheckAnswer, query: RecheckQuery, policy_key: Ed25519PublicKey, now: datetime) -> bool:
    """Whether ``answer`` is the policy's fresh, signed answer about exactly ``query``'s request.

    An answer to an admitting query counts only for the request it admitted (and an answer
    that admitted nothing never counts as an admission).
    """
    fresh = abs((now - answer.checked_at).total_seconds()) <= ANSWER_MAX_AGE_S
    if answer.admitted_request_id != query.admit_request_id:
        return False
    return fresh and answer.request_hash == query.request_hash and verify_event(answer, policy_key)
