"""Pure rules of the executor.

What to do with an idempotency claim and how receipts read (secrets: :mod:`.redaction`).

No I/O here; times are passed in (``now_ms``: Unix epoch milliseconds).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum, StrEnum
from typing import Any

import msgspec

from effectgate.contracts.events import ApprovalGranted, DecisionMade, EffectClaimed, ReceiptIssued, UncertainResolved
from effectgate.contracts.replays import ended_as
from effectgate.contracts.vocabulary import Outcome, SideEffectClass, Verdict
from effectgate.shared.stores.idempotency import key_digest

__all__ = [
    "MAX_EFFECT_ID_CHARS",
    "Claim",
    "ClaimState",
    "Step",
    "clipped",
    "effect_id",
    "never_ran",
    "next_step",
    "prior_claim_step",
    "receipt",
    "replay_receipt",
    "side_effect",
    "stale_at_ms",
    "target_id",
    "stored_receipt",
    "ttl_ms",
    "undecided_receipt",
]


class ClaimState(StrEnum):
    """What a claim found."""

    NEW = "new"
    """No record: this request now owns the key and must run the tool."""
    DONE = "done"
    """A receipt is stored: replay it, do not run."""
    MISMATCH = "mismatch"
    """The key was used with another fingerprint: refuse."""
    INFLIGHT = "inflight"
    """Another (or an earlier delivery of this) request holds the key and has no receipt yet."""
    ENDED = "ended"
    """The backstop ended this request without running it: never run it."""


@dataclass(frozen=True)
class Claim:
    """The answer to a claim.

    Attributes:
        state: what the claim found.
        owner_request_id: request id holding the key; None only when unknown.
        receipt: the stored receipt bytes for ``DONE``, else None.
        claimed_at_ms: when the owner claimed (Unix epoch, milliseconds); None when unknown.
        instance: the executor instance that owns an ``inflight`` record.
    """

    state: ClaimState
    owner_request_id: str | None
    receipt: bytes | None
    claimed_at_ms: int | None
    instance: str | None = None


def ttl_ms(ttl_s: float) -> int:
    """Convert a positive ``ttl_s`` to whole milliseconds, at least 1.

    Raises:
        ValueError: ``ttl_s`` is not positive.
    """
    if not ttl_s > 0:
        raise ValueError(f"ttl_s must be positive, got {ttl_s!r}")
    return max(1, round(ttl_s * 1000))


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
    """The key is being executed right now by a live executor: look again later."""
    TAKE_OVER = "take_over"
    """A read-only run was abandoned (its executor died): run it again."""
    UNCERTAIN = "uncertain"
    """A write was abandoned mid-run: its effect is unknown and it is never re-run blindly."""
    REFUSE_IN_USE = "refuse_in_use"
    """Another request's abandoned write holds the key."""
    ENDED = "ended"
    """The backstop ended this request without running it: nothing to do."""


_FOUND = {
    ClaimState.NEW: Step.RUN,
    ClaimState.MISMATCH: Step.REFUSE_REUSED,
    ClaimState.ENDED: Step.ENDED,
}


def next_step(claim: Claim, request_id: str, side_effect: SideEffectClass, abandoned: bool) -> Step:
    """Decide the step for ``claim`` (guarantee 3, docs/explanation/architecture.md: at most once per effect).

    Args:
        claim: what the claim found.
        request_id: the claiming request.
        side_effect: of the operation.
        abandoned: for an ``inflight`` record, its run can no longer finish (the owning
            executor instance stopped heart-beating, or it is past its timeout plus grace).
    """
    if claim.state in _FOUND:
        return _FOUND[claim.state]
    own = claim.owner_request_id == request_id
    if claim.state is ClaimState.DONE:
        return Step.REPUBLISH if own else Step.REPLAY
    if not abandoned:
        return Step.WAIT
    if not own:
        return Step.REFUSE_IN_USE
    return Step.TAKE_OVER if side_effect is SideEffectClass.READ_ONLY else Step.UNCERTAIN


def prior_claim_step(prior: EffectClaimed, request_id: str, fingerprint: str, prior_receipt: bool) -> Step:
    """Decide the step when the stream already holds a claim of the key (the index had lost it).

    The stream is the record: the earlier claim wins. Our own earlier claim without a
    receipt may have run (``UNCERTAIN``); another request's claim is a replay, a
    mismatch, or a key still in use, exactly as if the index had answered.
    """
    if not prior.request_id:
        return Step.REFUSE_IN_USE  # the stored claim is unreadable: nothing may run under this key
    if prior.request_id == request_id:
        return Step.REPUBLISH if prior_receipt else Step.UNCERTAIN
    if prior.request_hash != fingerprint:
        return Step.REFUSE_REUSED
    return Step.REPLAY if prior_receipt else Step.REFUSE_IN_USE


def stale_at_ms(claim: Claim, timeout_s: float, grace_s: float) -> int:
    """When an ``inflight`` claim counts as abandoned whatever its owner: claimed + timeout + grace."""
    return (claim.claimed_at_ms or 0) + int((timeout_s + grace_s) * 1000)


def effect_id(principal: str, idempotency_key: str) -> str:
    """``effect:<principal>:<16 hex of sha256(key)>``: one effect per (principal, key)."""
    return f"effect:{principal}:{key_digest(idempotency_key)[:16]}"


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


def undecided_receipt(principal: str, request_id: str, now: datetime, reason: str) -> ReceiptIssued:
    """The ``failed`` receipt of a request that was never decided (nothing ran)."""
    return ReceiptIssued(
        event_id=f"receipt:{principal}:{request_id}",
        occurred_at=now,
        request_id=request_id,
        principal=principal,
        outcome=Outcome.FAILED,
        reason_code="not_decided",
        reason=reason,
    )


def replay_receipt(
    decision: DecisionMade, now: datetime, stored: ReceiptIssued, resolved: UncertainResolved | None = None
) -> ReceiptIssued:
    """A ``replayed`` receipt carrying ``stored``'s outcome whole (:mod:`effectgate.contracts.replays`).

    Its ``replay_outcome`` is the stored outcome, and its reason code, reason, result (or
    ``result_ref``), effect id, redactions and ``detail_ref`` are the stored receipt's, unchanged, so a
    replayed failure says what went wrong. A stored replay is replayed as the receipt it
    replays (``replay_of`` names the request that ran). The tool does not run again: no
    ``duration_ms``, no ``retry_after_s``. A replay of an ``uncertain`` call carries ``resolved``,
    the resolution that holds (``resolution``, ``resolution_id``), when it was resolved.
    """
    original = ended_as(stored)
    return receipt(
        decision,
        now,
        Outcome.REPLAYED,
        stored.reason_code,
        stored.reason,
        result=stored.result,
        result_ref=stored.result_ref,
        effect_id=stored.effect_id,
        replay_of=stored.replay_of if stored.outcome is Outcome.REPLAYED and stored.replay_of else stored.request_id,
        replay_outcome=original if original is not Outcome.REPLAYED else None,
        redactions=stored.redactions,
        detail_ref=stored.detail_ref,
        resolution=resolved.resolution if resolved is not None else None,
        resolution_id=resolved.event_id if resolved is not None else None,
    )


_receipt = msgspec.json.Decoder(ReceiptIssued)


def stored_receipt(claim: Claim) -> ReceiptIssued:
    """The receipt a ``DONE`` claim holds, as the index stored it (this executor's own receipt, already signed).

    Raises:
        msgspec.DecodeError: the index holds no receipt, or not one.
    """
    return _receipt.decode(claim.receipt or b"")


def side_effect(decision: DecisionMade) -> SideEffectClass:
    """The class the decision names; a decision without one counts as security-sensitive."""
    return decision.side_effect_class or SideEffectClass.SECURITY_SENSITIVE


def never_ran(decision: DecisionMade, grant: ApprovalGranted | None) -> tuple[Outcome, str, str]:
    """``(outcome, reason_code, reason)`` of a request that ended before anything ran."""
    if decision.verdict is Verdict.NEEDS_APPROVAL and grant is None:
        return Outcome.DENIED, "approval_not_answered", "the approval was never answered in time: nothing ran"
    return Outcome.FAILED, "not_executed", "the request outlived its deadlines before it could run: nothing ran"


_REASON_CHARS = 300
"""Longest text copied from a tool (a server, a worker) into a reason."""

MAX_EFFECT_ID_CHARS = 256
"""Longest effect id taken from a tool (a payment id, a commit sha, a URL fit well within it)."""


def target_id(value: str | None) -> str | None:
    """``value`` as a target's effect id: ``None`` when there is none or it is over :data:`MAX_EFFECT_ID_CHARS`."""
    return value if value is not None and len(value) <= MAX_EFFECT_ID_CHARS else None


def clipped(text: str) -> str:
    """``text`` clipped to :data:`_REASON_CHARS` at its last whitespace, never inside a token.

    A token cut in half could escape the detectors that recognise it whole (a URL's
    password without its ``@``): the cut drops the partial token instead.
    """
    if len(text) <= _REASON_CHARS:
        return text
    head = text[: _REASON_CHARS - 1]
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    return head[:cut].rstrip() + "…" if cut > 0 else "…"
