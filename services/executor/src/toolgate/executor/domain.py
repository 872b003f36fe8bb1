"""Pure rules of the executor.

What to do with an idempotency claim, how receipts read, and scrubbing secrets out of results.

No I/O here; time is passed in as ``now_ms`` (Unix epoch milliseconds).
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from enum import Enum
from typing import Any

from toolgate.executor.ports import Claim, ClaimState
from toolgate.shared.events import DecisionMade, ReceiptIssued
from toolgate.shared.vocabulary import Outcome, SideEffectClass

__all__ = ["Step", "effect_id", "next_step", "receipt", "replay_receipt", "scrub"]


class Step(Enum):
    """What the executor does after claiming an idempotency key."""

    RUN = "run"
    """The key is new: run the tool."""
    REPUBLISH = "republish"
    """This request completed before (a redelivery): publish its stored receipt again."""
    REPLAY = "replay"
    """Another request completed the key: answer with a replayed receipt."""
    REFUSE_REUSED = "refuse_reused"
    """The key was used with other arguments."""
    WAIT = "wait"
    """The key is being executed right now: retry later."""
    TAKE_OVER = "take_over"
    """A read-only run was abandoned (crash): run it again."""
    UNCERTAIN = "uncertain"
    """A write was abandoned mid-run: its effect is unknown and it is never re-run blindly."""
    REFUSE_IN_USE = "refuse_in_use"
    """Another request's abandoned write holds the key."""


def next_step(claim: Claim, request_id: str, side_effect: SideEffectClass, now_ms: int, stale_after_ms: int) -> Step:
    """Decide the step for ``claim`` (guarantee 3, docs/architecture.md: at most once per effect)."""
    own = claim.owner_request_id == request_id
    if claim.state is ClaimState.NEW:
        return Step.RUN
    if claim.state is ClaimState.MISMATCH:
        return Step.REFUSE_REUSED
    if claim.state is ClaimState.DONE:
        return Step.REPUBLISH if own else Step.REPLAY
    if now_ms - (claim.claimed_at_ms or now_ms) < stale_after_ms:
        return Step.WAIT
    if not own:
        return Step.REFUSE_IN_USE
    return Step.TAKE_OVER if side_effect is SideEffectClass.READ_ONLY else Step.UNCERTAIN


def effect_id(principal: str, idempotency_key: str) -> str:
    """``effect:<principal>:<16 hex of sha256(key)>``: one effect per (principal, key)."""
    return f"effect:{principal}:{hashlib.sha256(idempotency_key.encode()).hexdigest()[:16]}"


def receipt(
    decision: DecisionMade, now: datetime, outcome: Outcome, reason_code: str, reason: str, **fields: Any
) -> ReceiptIssued:
    """The receipt ending ``decision``'s request."""
    bound = decision.request
    return ReceiptIssued(
        event_id=f"receipt:{decision.principal}:{decision.request_id}",
        occurred_at=now,
        request_id=decision.request_id,
        principal=decision.principal,
        outcome=outcome,
        reason_code=reason_code,
        reason=reason,
        tool=bound.tool if bound else None,
        version=bound.version if bound else None,
        operation=bound.operation if bound else None,
        idempotency_key=decision.idempotency_key,
        request_hash=decision.request_hash,
        **fields,
    )


def replay_receipt(decision: DecisionMade, now: datetime, stored: ReceiptIssued) -> ReceiptIssued:
    """A ``replayed`` receipt carrying the stored receipt's result."""
    reason = f"replay of request {stored.request_id} ({stored.outcome}): the tool did not run again"
    return receipt(
        decision,
        now,
        Outcome.REPLAYED,
        stored.reason_code,
        reason,
        result=stored.result,
        effect_id=stored.effect_id,
        replay_of=stored.request_id,
    )


_SECRET_PATTERNS = (
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\b(?:ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{20,}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}"),
    re.compile(r"(?i)\b(?:password|passwd|secret|api[_-]?key|token)\s*[:=]\s*[^\s\"',;]{6,}"),
)
"""Credential shapes: PEM private keys, AWS access key ids, GitHub, Slack and OpenAI-style
tokens, bearer tokens, and ``password=``/``token:`` assignments."""


def _redact(match: re.Match[str]) -> str:
    return f"[redacted sha256:{hashlib.sha256(match.group(0).encode()).hexdigest()[:12]}]"


def scrub(value: Any) -> Any:
    """Replace credential-shaped substrings in every string of ``value`` by a hash reference."""
    if isinstance(value, str):
        for pattern in _SECRET_PATTERNS:
            value = pattern.sub(_redact, value)
        return value
    if isinstance(value, dict):
        return {key: scrub(item) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub(item) for item in value]
    return value
